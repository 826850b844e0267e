"""Demo step times on this GPU (not recorded and recorded) and, optionally, the sample traces.

For each built-in demo: ms/step without recording, then ms/step while recording to
``<traces>/<demo>.json.gz`` (when ``--traces`` is given). With ``--profiler-trace FILE`` it also records
the overlap demo with torch.profiler (CPU + CUDA, with_stack=True, a few steps) as a gzip Chrome trace.
Prints a Markdown section (``## demos``), written to ``--md`` if given.

    PYTHONPATH=. python3 benchmarks/demos.py --traces sample_traces \\
        --profiler-trace sample_traces/torch-profiler-overlap.pt.trace.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def profiler_trace(path: str, steps: int = 4) -> None:
    """Record ``steps`` steps of the overlap demo with torch.profiler into ``path`` (gzip)."""
    import torch

    from collector.demos import loops

    batch, width, depth = loops.sizes(torch.cuda.get_device_properties(0).total_memory)
    loop = loops.overlap(loops.DemoContext(batch, width, depth))
    for _ in range(3):
        next(loop)
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, with_stack=True, record_shapes=True) as prof:
        for i in range(steps):
            with torch.profiler.record_function(f"step {i}"):
                next(loop)
            prof.step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
            shutil.copyfileobj(src, dst)
    loop.close()


def main(argv: list[str] | None = None) -> int:
    import torch

    from collector.demos import loops
    from collector.recording.api import record

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", help="folder for the recorded sample traces")
    parser.add_argument("--profiler-trace", help="also write a torch.profiler trace of the overlap demo here")
    parser.add_argument("--md")
    parser.add_argument("--demos", default=",".join(loops.DEMOS), help="comma-separated demo names")
    args = parser.parse_args(argv)
    rows = []
    for name in args.demos.split(","):
        demo = loops.get(name)
        marks: list[float] = []
        plain = loops.run_demo(name, None, quiet=True, times=marks)
        out = os.path.join(args.traces, f"{name}.json.gz") if args.traces else None
        rec = record(f"demo:{name}", out, source="demo", command=f"streamscope record demo:{name}")
        rec_marks: list[float] = []
        recorded = loops.run_demo(name, rec, quiet=True, times=rec_marks)
        size = os.path.getsize(out) / 1e6 if out else 0.0
        rows.append((name, demo.steps, plain, recorded, size))
        if name == "d2h":  # first half blocking .cpu() (syncs every step), second half non_blocking
            half = demo.steps // 2
            for label, lo, hi, n in (
                ("d2h: blocking half", 0, half, half),
                ("d2h: non_blocking half", half, -1, demo.steps - half),
            ):
                ms = (marks[hi] - marks[lo]) * 1e3 / n
                ms_r = (rec_marks[hi] - rec_marks[lo]) * 1e3 / n
                rows.append((label, n, ms, ms_r, 0.0))
        print(f"{name}: {plain:.2f} ms/step plain, {recorded:.2f} recorded, trace {size:.2f} MB", flush=True)
        torch.cuda.empty_cache()
    if args.profiler_trace:
        profiler_trace(args.profiler_trace)
        print(f"torch.profiler trace: {os.path.getsize(args.profiler_trace) / 1e6:.2f} MB")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    batch, width, depth = loops.sizes(torch.cuda.get_device_properties(0).total_memory)
    lines = [
        "## demos",
        "",
        f"{when}, {torch.cuda.get_device_name(0)}, torch {torch.__version__}; "
        "`PYTHONPATH=. python3 benchmarks/demos.py`. Each demo trains a "
        f"{depth}-layer MLP (width {width}, TF32) with SGD on {batch}x{width} float32 batches "
        f"({batch * width * 4 / 2**20:.0f} MiB); ms/step is wall time over the run, GPU finished, "
        "after 3 warm-up steps; recorded with the default (CUPTI) timing. The regime demos (tiny-ops, "
        "convnet, transformer-small, transformer-large) are their own models (collector/demos/loops.py).",
        "",
        "| demo | steps | ms/step | ms/step recorded | sample trace MB |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r[0]} | {r[1]} | {r[2]:.2f} | {r[3]:.2f} | {r[4]:.2f} |" for r in rows]
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
