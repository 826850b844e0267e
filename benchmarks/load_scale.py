"""Load-scale benchmark: how fast, and in how much memory, a large Chrome trace becomes the run DataFrame.

Generates (into ./bench-data/, reused when present) a synthetic but realistic torch.profiler (Kineto) trace
of about 100 MB and 1 GB: python_function and cpu_op nests, cudaLaunchKernel runtime calls with ``ac2g``
flows to kernels with long templated names on many streams, pinned and pageable copies, memsets and
stream syncs, laid out the way Kineto writes them. Each file is loaded in a fresh subprocess (so peak RSS
is that load's own) through ``collector.traceformat.read.load_trace`` when the torch.profiler importer exists,
else ``collector.traceformat.events.read_events``; the script prints MB/s and peak RSS / file size and writes the
``## load_scale`` section of benchmarks/RESULTS.md.

    python3 benchmarks/load_scale.py                 # 100 MB and 1 GB
    python3 benchmarks/load_scale.py --sizes 100     # just 100 MB
    python3 benchmarks/load_scale.py --stdlib        # also time the stdlib-json fallback (slow)
    python3 benchmarks/load_scale.py --ours 3000000  # our own format: write + load of 3M intervals

It also writes a synthetic run of ``--ours`` intervals (collector.synthetic) in our own format, .json and
.json.gz, times ``write_trace`` and loads each back through ``load_trace`` in a fresh process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from results_file import write_section

from collector.synthetic.kineto_json import generate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench-data"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "load_scale"

_CHILD = r"""
import json, os, resource, sys, time
path, how = sys.argv[1], sys.argv[2]
import pandas, numpy  # imported before the clock and the baseline, like a running app
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
if how == "load_trace":
    from collector.load import load_trace
    frame = load_trace(path).intervals
else:
    from collector.traceformat.events import read_events
    frame = read_events(path, fast=(how == "read_events")).events
secs = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"secs": secs, "peak": peak, "base": base, "rows": len(frame),
                  "frame_bytes": int(frame.memory_usage(deep=True).sum())}))
"""


def measure(path: Path, how: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), how], capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"load failed ({how}): {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def write_ours(n: int) -> list[tuple[Path, float]]:
    """Write a synthetic run of about ``n`` intervals as .json and .json.gz; return (path, seconds)."""
    import time

    sys.path.insert(0, str(ROOT))
    from collector.synthetic import synthetic_trace
    from collector.traceformat.write import write_trace

    trace = synthetic_trace(n, ranks=2)
    out = []
    for suffix in (".json", ".json.gz"):
        path = DATA / f"ours-{n // 1000}k{suffix}"
        t0 = time.perf_counter()
        write_trace(trace, path)
        out.append((path, time.perf_counter() - t0))
    return out


_LABELS = {
    "load_trace": "load_trace (msgspec reader + torch.profiler import)",
    "read_events": "read_events (msgspec reader)",
    "stdlib": "read_events (stdlib json fallback)",
}


def _how() -> str:
    try:
        import collector.importers.kineto  # noqa: F401
    except ImportError:
        return "read_events"
    return "load_trace"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000", help="file sizes in MB, comma separated")
    parser.add_argument("--stdlib", action="store_true", help="also measure the stdlib json fallback")
    parser.add_argument("--repeat", type=int, default=3, help="loads per file (best time reported, and the worst)")
    parser.add_argument("--ours", type=int, default=3_000_000, help="intervals in our-format run (0: skip)")
    parser.add_argument("--no-results", action="store_true", help="do not write benchmarks/RESULTS.md")
    args = parser.parse_args(argv)
    DATA.mkdir(exist_ok=True)
    how = _how()
    rows = []
    for mb in (int(s) for s in args.sizes.split(",")):
        path = DATA / f"kineto-{mb}mb.json"
        if not path.exists():
            n = generate(path, mb * 1_000_000)
            print(f"generated {path.name}: {n:,} events")
        size = path.stat().st_size
        for mode in [how] + (["stdlib"] if args.stdlib else []):
            runs = [measure(path, mode) for _ in range(args.repeat if mode != "stdlib" else 1)]
            r = min(runs, key=lambda x: x["secs"])
            r["worst"] = max(x["secs"] for x in runs)
            r["peak"] = max(x["peak"] for x in runs)
            row = (mb, mode, size, r)
            rows.append(row)
            print(
                f"{path.name} via {mode}: {r['rows']:,} rows in {r['secs']:.1f} s (worst {r['worst']:.1f}) "
                f"= {size / 1e6 / r['secs']:.0f} MB/s; "
                f"peak RSS {r['peak'] / 1e6:,.0f} MB = {r['peak'] / size:.2f}x the file "
                f"(baseline {r['base'] / 1e6:.0f} MB); frame {r['frame_bytes'] / 1e6:,.0f} MB"
            )
    ours = []
    if args.ours:
        for path, write_s in write_ours(args.ours):
            size = path.stat().st_size
            r = measure(path, "load_trace")
            ours.append((path, write_s, size, r))
            print(
                f"{path.name}: {r['rows']:,} intervals, {size / 1e6:,.0f} MB; write_trace {write_s:.1f} s; "
                f"load_trace {r['secs']:.1f} s, peak RSS {r['peak'] / 1e6:,.0f} MB"
            )
    if not args.no_results:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        lines = [
            f"Measured {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node() or 'this machine'}: "
            f"{os.cpu_count()} cores, Python {platform.python_version()}, "
            "`python3 benchmarks/load_scale.py"
            + "".join(" " + a for a in (argv if argv is not None else sys.argv[1:]))
            + "`.",
            "Synthetic Kineto-like trace (python_function, cpu_op, cuda_runtime + ac2g flows, kernels with long "
            f"templated names on 10 streams, copies, memsets, syncs), each load in a fresh process, "
            f"{args.repeat} loads "
            "per file (the stdlib path once); peak RSS is the largest seen and "
            "includes the interpreter with pandas/numpy imported (baseline). Target: 1 GB in <= 20 s at <= 3x.",
            f"Load average when measured: {load:.1f} (a shared machine: timings vary by tens of percent).",
            "",
            "`rows` is what the loader returns: run intervals for load_trace (flows, metadata and python_function "
            "events are not intervals), one row per event for read_events.",
            "",
            "| file | loaded by | rows | seconds, best (worst) | MB/s | peak RSS | RSS / file | frame in memory |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for _mb, mode, size, r in rows:
            lines.append(
                f"| {size / 1e6:,.0f} MB | {_LABELS[mode]} | {r['rows']:,} | {r['secs']:.1f} ({r['worst']:.1f}) | "
                f"{size / 1e6 / r['secs']:.0f} | "
                f"{r['peak'] / 1e6:,.0f} MB | {r['peak'] / size:.2f}x | {r['frame_bytes'] / 1e6:,.0f} MB |"
            )
        if ours:
            lines += [
                "",
                "Our own format (collector.synthetic run, 2 ranks), written by `write_trace` and read back by "
                "`load_trace` in a fresh process:",
                "",
                "| file | intervals | size | write_trace s | load_trace s | peak RSS | RSS / JSON size |",
                "|---|---|---|---|---|---|---|",
            ]
            json_size = {p.name: s for p, _, s, _ in ours if p.suffix == ".json"}
            for path, write_s, size, r in ours:
                plain = json_size.get(path.name.removesuffix(".gz"), size)
                lines.append(
                    f"| {path.name} | {r['rows']:,} | {size / 1e6:,.0f} MB | {write_s:.1f} | {r['secs']:.1f} | "
                    f"{r['peak'] / 1e6:,.0f} MB | {r['peak'] / plain:.2f}x |"
                )
        write_section(SECTION, "\n" + "\n".join(lines))
        print(f"wrote the ## {SECTION} section of {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
