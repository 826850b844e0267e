"""Timeline tools at scale: name search and the queue track on a large synthetic run, through the API.

Stores one synthetic training loop (``collector.synthetic.synthetic_trace``, overlap pattern; its analysis is
skipped, the tools do not read it) in a fresh data folder, reopens the store so the run is served from its
saved, memory-mapped index like any stored run, and reports:

- the one-time cost of the first /queue or /links call (reads the run file's ``launch_id`` column and
  builds the per-stream queues);
- server time (``Server-Timing``) and answer size of /queue views (whole run, 10%, 1%, 0.01%) and of
  /search answers (a common substring, a regex, a rare name, a next-page, a window), median of 5;
- the one-time cost of the first /range call (each rank's busy sets with prefix sums of their lengths), then
  /range over one step and over the whole run.

Writes the ``## explore_scale`` section of benchmarks/RESULTS.md.
Usage: python3 benchmarks/explore_scale.py [--intervals 10000000] [--no-results]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from results_file import write_section  # noqa: E402

SECTION = "explore_scale"
BUDGET_MS = 150.0


def _server_ms(response) -> float:
    timing = response.headers.get("Server-Timing", "")
    return float(timing.split("dur=")[1].split(",")[0]) if "dur=" in timing else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-results", action="store_true")
    args = parser.parse_args(argv)

    from collector.synthetic import synthetic_trace
    from webapp import create_app
    from webapp.ingest import add_trace

    load = os.getloadavg()[0]
    t = time.perf_counter()
    trace = synthetic_trace(args.intervals, pattern="overlap", steps=200)
    make_s = time.perf_counter() - t
    data = tempfile.mkdtemp(prefix="explore-scale-")
    config = {"DATA_DIR": data, "IMPORT_SAMPLES": False, "TESTING": True, "RECORD_ENABLED": False}
    info = add_trace(create_app(config).extensions["streamscope.store"], trace, "big", analysis={})
    del trace
    client = create_app(config).test_client()  # a fresh store: the run opens from its saved index
    api = f"/api/runs/{info.id}"
    span = info.end_ns - info.start_ns
    client.get(f"{api}/timeline?width_px=1240")  # open the index (not timed here: see web_scale)

    t = time.perf_counter()
    first = client.get(f"{api}/queue?width_px=1240")
    build_s = time.perf_counter() - t
    assert first.status_code == 200, first.get_json()

    def timed(url: str) -> tuple[float, int, dict]:
        runs = []
        for _ in range(args.repeats):
            r = client.get(url)
            assert r.status_code == 200, (url, r.get_json())
            runs.append(_server_ms(r))
        return statistics.median(runs), len(r.data), r.get_json()

    rows = []
    for label, frac in (("whole run", 1.0), ("10%", 0.1), ("1%", 0.01), ("0.01%", 0.0001)):
        a = int(span * 0.45)
        b = a + max(1000, int(span * frac)) if frac < 1 else span
        a = 0 if frac == 1 else a
        ms, size, body = timed(f"{api}/queue?start_ns={a}&end_ns={b}&width_px=1240")
        depth = max(max(ln["depth"]) for ln in body["lanes"])
        rows.append(("queue", label, ms, size, f"max depth {depth}"))
    common = timed(f"{api}/search?q=gemm&limit=100")
    rows.append(("search", "substring 'gemm', first 100", common[0], common[1], f"{common[2]['total']:,} matches"))
    cursor = common[2]["matches"][-1]["cursor"]
    nxt = timed(f"{api}/search?q=gemm&limit=100&after={cursor}")
    rows.append(("search", "next page after a cursor", nxt[0], nxt[1], f"{len(nxt[2]['matches'])} on the page"))
    rx = timed(f"{api}/search?q=%5Eaten%3A%3A(item%7Cto)%24&regex=1&limit=1")
    rows.append(("search", r"regex '^aten::(item\|to)$', next match", rx[0], rx[1], f"{rx[2]['total']:,} matches"))
    rare = timed(f"{api}/search?q=Memcpy&limit=100")
    rows.append(("search", "rarer 'Memcpy', first 100", rare[0], rare[1], f"{rare[2]['total']:,} matches"))
    win = timed(f"{api}/search?q=kernel&start_ns={span // 2}&end_ns={span // 2 + span // 100}&limit=1000")
    rows.append(("search", "'kernel' in a 1% window (highlight)", win[0], win[1], f"{win[2]['total']:,} matches"))
    t = time.perf_counter()
    assert client.get(f"{api}/range?start_ns=0&end_ns=1000").status_code == 200
    range_build_s = time.perf_counter() - t
    step = timed(f"{api}/range?start_ns={span // 2}&end_ns={span // 2 + span // 200}")
    rows.append(("range", "one step (0.5%)", step[0], step[1], f"{step[2]['intervals']:,} intervals"))
    whole = timed(f"{api}/range")
    rows.append(("range", "whole run", whole[0], whole[1], f"{whole[2]['intervals']:,} intervals"))

    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "",
        f"Measured {when} on {platform.node()} ({os.cpu_count()} cores, Python {platform.python_version()}), "
        f"`python3 benchmarks/explore_scale.py --intervals {args.intervals}`; load average before the run "
        f"{load:.2f} (other work on the machine inflates the times).",
        "",
        f"One synthetic loop (overlap pattern) of {info.intervals:,} intervals, made in {make_s:.1f} s, served "
        "from its saved index through the Flask test client. The first /queue (or /links) call reads the "
        f"run's `launch_id` column and builds the per-stream queues once: **{build_s:.2f} s**. Then, median of "
        f"{args.repeats}, server time from Server-Timing (view budget {BUDGET_MS:.0f} ms):",
        "",
        "| endpoint | request | server ms | JSON bytes | answer |",
        "|---|---|---:|---:|---|",
        *[f"| {e} | {label} | {ms:.1f} | {size:,} | {note} |" for e, label, ms, size, note in rows],
        "",
        f"The first /range call builds each rank's busy sets (unions with prefix sums) once: "
        f"**{range_build_s:.2f} s**; after that a range of any width is measured by binary search, and only "
        "its interval count and top ops read the rows inside it.",
    ]
    print("\n".join(lines))
    if not args.no_results:
        write_section(SECTION, "\n".join(lines))
    over = [r for r in rows if r[0] != "range" and r[2] > BUDGET_MS]
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
