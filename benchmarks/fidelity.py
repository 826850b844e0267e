"""Fidelity: our CUDA-event GPU durations against torch.profiler's CUPTI kernel durations, same ops, same run.

A fixed sequence of ops (matmuls, elementwise, reductions, softmax, layer norm; 50 us to several ms each)
runs once with both the recorder and torch.profiler (CPU + CUDA activities) active. Our GPU intervals and
the profiler's ops that launched kernels are paired in call order; the profiler's duration is the sum of
that op's kernel durations. Reports the median relative error overall and for ops
of 50 us or more (target <= 2%). Prints a Markdown section (``## fidelity``), written to ``--md`` if given.

    PYTHONPATH=. python3 benchmarks/fidelity.py --md /tmp/fidelity.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _ops() -> list[tuple[str, Callable[[], Any]]]:
    import torch

    f = torch.nn.functional
    a = {n: torch.randn(n, n, device="cuda") for n in (1024, 2048, 4096)}
    h = {n: torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for n in (4096, 8192)}
    big = torch.randn(64 * 1024 * 1024, device="cuda")
    mid = torch.randn(8 * 1024 * 1024, device="cuda")
    x2 = torch.randn(8192, 4096, device="cuda")
    ln = torch.nn.LayerNorm(4096).cuda()
    return [
        ("mm fp32 1024", lambda: a[1024] @ a[1024]),
        ("mm fp32 2048", lambda: a[2048] @ a[2048]),
        ("mm fp32 4096", lambda: a[4096] @ a[4096]),
        ("mm bf16 4096", lambda: h[4096] @ h[4096]),
        ("mm bf16 8192", lambda: h[8192] @ h[8192]),
        ("add 64M", lambda: big + big),
        ("mul_ 64M", lambda: big.mul_(1.0)),
        ("relu 8M", lambda: torch.relu(mid)),
        ("sum 64M", lambda: big.sum()),
        ("softmax 8192x4096", lambda: torch.softmax(x2, dim=1)),
        ("layer_norm 8192x4096", lambda: ln(x2)),
        ("gelu 8192x4096", lambda: f.gelu(x2)),
    ]


def _profiler_durations(prof: Any) -> list[tuple[str, float]]:
    """In call order: (op name, summed CUPTI kernel durations in us) of each op that launched kernels."""
    out = []
    for evt in sorted(prof.events(), key=lambda e: e.time_range.start):
        kernels = getattr(evt, "kernels", None) or []
        if kernels:
            out.append((str(evt.name), sum(float(k.duration) for k in kernels)))
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    from collector.recording.recorder import Recorder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--md")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    ops = _ops()
    for _ in range(3):
        for _, fn in ops:
            fn()
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    rec = Recorder("fidelity", None, probe=False)
    rec.start()  # before the profiler: its calibration kernels stay out of the profile
    with torch.profiler.profile(activities=acts) as prof:
        for _, fn in ops:
            for _ in range(args.repeats):
                fn()
            rec.step()
        torch.cuda.synchronize()
    rec.stop()
    assert rec.trace is not None
    iv = rec.trace.intervals
    gpu = iv[(iv["lane_kind"] != "cpu_thread")].sort_values("start_ns")
    theirs = _profiler_durations(prof)
    if len(theirs) != len(gpu):
        print(f"cannot pair: {len(gpu)} GPU intervals, {len(theirs)} profiler ops with kernels", file=sys.stderr)
        return 1
    gpu = gpu.assign(ref_us=[d for _, d in theirs], ref_name=[n for n, _ in theirs])
    rows = []
    errors_all: list[float] = []
    errors_big: list[float] = []
    for step, (label, _) in enumerate(ops):
        mine = gpu[gpu["step"] == step]
        for name, grp in mine.groupby("name", observed=True):
            ours = (grp["dur_ns"].to_numpy() / 1e3).tolist()
            ref = grp["ref_us"].tolist()
            errs = [abs(o - r) / r for o, r in zip(ours, ref, strict=True) if r > 0]
            errors_all += errs
            if statistics.median(ref) >= 50:
                errors_big += errs
            rows.append(
                (
                    label,
                    str(name),
                    len(ours),
                    statistics.median(ours),
                    statistics.median(ref),
                    statistics.median(errs) * 100,
                )
            )
    med_big = statistics.median(errors_big) * 100 if errors_big else float("nan")
    med_all = statistics.median(errors_all) * 100 if errors_all else float("nan")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## fidelity",
        "",
        f"{when}, {torch.cuda.get_device_name(0)}, torch {torch.__version__}; "
        "`PYTHONPATH=. python3 benchmarks/fidelity.py`. Our CUDA-event GPU durations against torch.profiler's "
        f"CUPTI kernel durations for the same calls ({args.repeats} calls per op, both active in one run).",
        "",
        "| op | aten op | calls | ours us (median) | CUPTI us (median) | median rel. error % |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.2f} |" for r in rows]
    lines += [
        "",
        f"Median relative error, ops >= 50 us: **{med_big:.2f}%** (target <= 2%: "
        f"{'yes' if med_big <= 2 else 'NO'}); all ops: {med_all:.2f}%. Event overhead measured at start and "
        f"subtracted from each interval: {rec.trace.meta.notes.get('event_overhead_ns', 0) / 1e3:.2f} us.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
