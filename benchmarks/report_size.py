"""Report-size benchmark: how large `streamscope report` files get for large runs, and how long they take.

Builds synthetic runs (collector.synthetic) of ``--intervals`` (default 1M and 5M; a 1 GB torch.profiler
trace holds about 4M events), analyses and indexes each, writes its report and prints the file size, the
timeline data embedded (against the budget), the zoom levels reached and what was left out. With
``--browser`` it also opens each file in headless Chromium (network cut) and times the first timeline
paint. Figures go to the ``## report_size`` section of benchmarks/RESULTS.md.

    python3 benchmarks/report_size.py
    python3 benchmarks/report_size.py --intervals 10000000 --browser
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from results_file import write_section

from collector.synthetic import synthetic_trace  # noqa: E402
from webapp.report import prepare_run, run_report  # noqa: E402
from webapp.report.build import FILE_BOUND_BYTES, run_context  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SECTION = "report_size"
MIB = 2**20


def first_paint_s(path: Path) -> float:
    """Seconds from navigation to the timeline's first paint in headless Chromium, network off."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1440, "height": 960})
        page.context.set_offline(True)
        t0 = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_function("window.ssTimeline && ssTimeline.stats.firstPaintMs !== null", timeout=120_000)
        took = time.perf_counter() - t0
        browser.close()
    return took


def measure(n: int, pattern: str, steps: int, browser: bool, out_dir: Path) -> str:
    t0 = time.perf_counter()
    trace = synthetic_trace(n, pattern=pattern, steps=steps)
    t1 = time.perf_counter()
    run = prepare_run(trace, f"synthetic-{pattern}-{n}")
    t2 = time.perf_counter()
    html = run_report(run)
    t3 = time.perf_counter()
    path = out_dir / f"{pattern}-{n}.html"
    path.write_text(html, encoding="utf-8")
    ctx = run_context(run)  # the same context again, for its numbers (cheap next to the report)
    size = path.stat().st_size
    per_step = len(run.trace.intervals) // max(1, steps)
    levels = ", ".join(
        f"{f.label} (step {f.step}, ~{per_step:,} intervals) to level {d}"
        for f, d in zip(ctx["focus"], _depths(ctx), strict=True)
    )
    views = len(ctx["page"]["timeline"]["views"])
    paint = f"; first timeline paint in Chromium {first_paint_s(path):.1f} s" if browser else ""
    line = (
        f"- {len(trace.intervals):,} intervals ({pattern}, {steps} steps): file {size / MIB:.2f} MiB "
        f"({'within' if size <= FILE_BOUND_BYTES else 'OVER'} the {FILE_BOUND_BYTES / MIB:.0f} MiB bound), timeline "
        f"data {ctx['data_size'] / MIB:.2f} MiB of {ctx['data_budget'] / MIB:.2f} MiB in {views} views; {levels}. "
        f"Build {t1 - t0:.1f} s, analyse + index {t2 - t1:.1f} s, report {t3 - t2:.1f} s{paint}."
    )
    print(line, flush=True)
    for note in ctx["left_out"]:
        print(f"    left out: {note}")
    return line


def _depths(ctx: dict) -> list[int]:
    views = ctx["page"]["timeline"]["views"]
    return [max((v["level"] for v in views if v["focus"] == i), default=-1) for i in range(len(ctx["focus"]))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--patterns", nargs="+", default=["sync-trap", "launch-bound"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--many-steps", type=int, default=5000, help="also one run of the first size with this many steps (0: none)"
    )
    parser.add_argument("--browser", action="store_true", help="also time the first paint in Chromium")
    parser.add_argument("--no-results", action="store_true", help="do not write benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.intervals:
            for pattern in args.patterns:
                lines.append(measure(n, pattern, args.steps, args.browser, Path(tmp)))
        if args.many_steps:
            lines.append(measure(args.intervals[0], "naive", args.many_steps, args.browser, Path(tmp)))
    if not args.no_results:
        now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        cmd = "python3 benchmarks/report_size.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(
            SECTION,
            "\n".join(
                [
                    "",
                    f"Measured {now} on {platform.machine()}, {os.cpu_count()} CPU cores, Python "
                    f"{platform.python_version()} (`{cmd.strip()}`). One self-contained HTML file per run: Plotly "
                    "(1.87 MiB, gzip + base64), the page script and tables, and the timeline views embedded within "
                    "the data budget (default 2.5 MiB, less what the file would pass its 5 MiB bound by). "
                    '"To level L": the step can be zoomed to 1/2^L of its width with views drawn at 2,000 px; '
                    "finer zoom shows the deepest view's "
                    "merged boxes (what the report lists as left out). The first paint is the file opened from disk "
                    "with the network off, Plotly unpacked included.",
                    "",
                    *lines,
                ]
            ),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
