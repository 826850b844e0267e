"""Memory bound of a served upload and whole-run views of many lanes; prints a RESULTS.md section.

1. A gzip bomb (8 GiB of JSON whitespace in ~8 MB) posted to ``streamscope serve`` with its default budget:
   refused with 413, the server's peak RSS (VmHWM from /proc) before and after.
2. Four concurrent uploads of the same synthetic trace (``--intervals``, ~200 MB of JSON for 1M) against
   ``--max-memory``: all stored, how many waited, the server's peak RSS against the budget.
3. Whole-run timeline views of ``--lanes`` lanes x ``--per-lane`` intervals from a saved index, cold (a new
   process, pages not touched) and warm, and the index's size on disk against the Parquet file.

    python benchmarks/server_limits.py [--intervals 1000000] [--max-memory 1500M] [--lanes 64] [--per-lane 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from serving import running_server  # noqa: E402


def hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def post(base: str, name: str, body: bytes) -> tuple[int, dict]:
    req = urllib.request.Request(f"{base}/api/runs?name={name}&ticket={name}", data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def bomb(work: Path) -> list[str]:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = packer.compress(b" " * (64 << 20)) + packer.flush()
    body = member * 128  # 8 GiB inflated
    with running_server(work / "s", work / "bomb-data", cwd=work, args=("--no-samples",)) as (base, proc):
        before = hwm_mb(proc.pid)
        t0 = time.perf_counter()
        status, answer = post(base, "bomb.json.gz", body)
        took = time.perf_counter() - t0
        after = hwm_mb(proc.pid)
    return [
        f"- gzip bomb: {len(body) / 1e6:.1f} MB inflating to 8 GiB, default budget: HTTP {status} in {took:.1f} s "
        f"(`{answer.get('error', '')}`); server peak RSS {before:.0f} MB before, {after:.0f} MB after."
    ]


def concurrent(work: Path, intervals: int, budget: str) -> list[str]:
    from collector.synthetic import synthetic_trace
    from collector.traceformat.write import write_trace

    path = work / "big.json"
    write_trace(synthetic_trace(intervals, ranks=2), str(path))
    body = path.read_bytes()
    results: list[tuple[int, dict]] = []
    queued: set[str] = set()
    args = ("--no-samples", "--max-memory", budget)
    with running_server(work / "s", work / "conc-data", cwd=work, args=args) as (base, proc):
        before = hwm_mb(proc.pid)
        names = [f"up{i}.json" for i in range(4)]
        threads = [threading.Thread(target=lambda n=n: results.append(post(base, n, body))) for n in names]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            with urllib.request.urlopen(base + "/api/ingest", timeout=10) as resp:
                queue = json.loads(resp.read())
            queued |= {j["ticket"] for j in queue["jobs"] if j["state"] == "queued"}
            time.sleep(0.2)
        took = time.perf_counter() - t0
        after = hwm_mb(proc.pid)
        need = queue["budget_bytes"] / 1e6
    ok = sum(1 for s, _ in results if s == 201)
    return [
        f"- four concurrent uploads of {len(body) / 1e6:.0f} MB ({intervals:,} intervals each), `--max-memory "
        f"{budget}` ({need:.0f} MB): {ok}/4 stored in {took:.1f} s, {len(queued)} of them queued at some point; "
        f"server peak RSS {after:.0f} MB (idle {before:.0f} MB), i.e. {after - before:.0f} MB for ingest against "
        f"the {need:.0f} MB budget."
    ]


_VIEW_CHILD = """
import json, sys, time
from pathlib import Path
from webapp.store import Store
t0 = time.perf_counter()
store = Store(sys.argv[1]); run_id = sys.argv[2]
index = store.index(run_id)
opened = time.perf_counter() - t0
from webapp.timeline import view_payload
out = []
for _ in range(3):
    t = time.perf_counter()
    view_payload(index, index.origin_ns, index.end_ns, 1600)
    out.append(time.perf_counter() - t)
print(json.dumps({"open_s": opened, "views_s": out}))
"""


def many_lanes(work: Path, lanes: int, per_lane: int) -> list[str]:
    import numpy as np
    import pandas as pd

    from collector.model import Lane, LaneKind, RunMeta, Trace, conform_intervals, empty_markers
    from webapp.ingest import add_trace
    from webapp.store import Store

    rng = np.random.default_rng(0)
    parts = []
    for i in range(lanes):
        dur = rng.integers(800, 1500, per_lane)
        start = np.cumsum(dur + rng.integers(100, 3000, per_lane))
        parts.append(pd.DataFrame({"lane": i, "start_ns": start, "end_ns": start + dur, "dur_ns": dur}))
    f = pd.concat(parts, ignore_index=True)
    f["id"], f["rank"], f["kind"], f["name"], f["stream"] = np.arange(len(f)), 0, "kernel", "k", f["lane"]
    f["lane_kind"], f["lane_label"] = "compute_stream", "s" + f["lane"].astype(str)
    lane_list = tuple(Lane(0, LaneKind.COMPUTE_STREAM, i, f"s{i}") for i in range(lanes))
    trace = Trace(RunMeta(), lane_list, conform_intervals(f), empty_markers())
    store = Store(work / "lanes-data")
    info = add_trace(store, trace, "lanes", analysis={"summary": {}})
    parquet = store.run_path(info.id).stat().st_size
    lod = sum(p.stat().st_size for p in store.lod_path(info.id).iterdir())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", _VIEW_CHILD, str(store.root), info.id], capture_output=True, text=True, env=env
    )
    timing = json.loads(out.stdout)
    cold, *warm = (v * 1000 for v in timing["views_s"])
    return [
        f"- whole-run view of {lanes} lanes x {per_lane:,} intervals at 1600 px, from the saved index in a new "
        f"process: opened in {timing['open_s'] * 1000:.0f} ms, first view {cold:.0f} ms (cold), then "
        f"{min(warm):.0f} ms.",
        f"- index on disk {lod / 1e6:.0f} MB against {parquet / 1e6:.0f} MB of Parquet ({lod / parquet:.1f}x; "
        f"{lod / (lanes * per_lane):.0f} bytes per interval).",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", type=int, default=1_000_000)
    parser.add_argument("--max-memory", default="1500M")
    parser.add_argument("--lanes", type=int, default=64)
    parser.add_argument("--per-lane", type=int, default=200_000)
    parser.add_argument("--skip", nargs="*", default=[], choices=["bomb", "concurrent", "lanes"])
    args = parser.parse_args(argv)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    lines = [
        f"## server_limits ({time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{ram:.0f} GB RAM, Python {platform.python_version()})",
        "",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "s").mkdir()
        if "bomb" not in args.skip:
            lines += bomb(work)
        if "concurrent" not in args.skip:
            lines += concurrent(work, args.intervals, args.max_memory)
        if "lanes" not in args.skip:
            lines += many_lanes(work, args.lanes, args.per_lane)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
