"""Fidelity: our GPU intervals against CUPTI's, per loop and regime, cold first steps included.

For every loop of benchmarks/regimes.py:

* **events** timing runs *together with* a CUPTI reference (torch.profiler, CUDA activity only), so both see
  the same kernels; the traces' clocks are joined through (monotonic, wall) pairs taken at start and stop;
* **cupti** timing (the default) runs alone, and its busy time is compared with a reference run of the
  same loop right after it.

Per mode: GPU busy per step (union of kernel/memcpy/memset intervals) against the reference, median over
steps; median |start error| and |end error| of intervals (events: each interval against the first/last
reference work whose midpoint it holds); busy time the mode counts while the reference GPU was idle.
``cold`` is the loop's first 3 steps (model set-up, library initialisation, lazy kernel loading), ``warm``
20 steps after 10 unrecorded ones. ``--out DIR`` also writes each recorded trace (for ``streamscope analyze``).

    PYTHONPATH=. python3 benchmarks/fidelity.py --md /tmp/fidelity.md --out /tmp/traces
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from regimes import LOOPS, loop_steps, step_fn, sync

from collector.recording.reference import (
    Reference,
    busy_in,
    clock_pair,
    covered_idle,
    edge_errors,
    gpu_work,
    mono_to_wall,
)


def record_steps(step: Any, steps: int, timing: str, with_reference: bool, out: Path | None) -> dict[str, Any]:
    """Record ``steps`` steps; ours (start, end, step windows) on the wall clock, and the reference's."""
    from collector.recording.api import record

    rec = record("fidelity", str(out) if out else None, timing=timing, probe=False)
    ref = Reference() if with_reference else None
    if ref is not None:
        ref.start()
    p0 = clock_pair()
    rec.start()
    for _ in range(steps):
        step()
        rec.step()
    sync()
    trace = rec.stop()
    p1 = clock_pair()
    rs, re = ref.stop() if ref is not None else (None, None)
    s, e = gpu_work(trace)
    st = trace.steps()
    w0, w1 = st["start_ns"].to_numpy(np.int64), st["end_ns"].to_numpy(np.int64)
    if trace.meta.clock != "unix_ns":  # events timing: host monotonic clock -> wall clock
        to_wall = mono_to_wall(p0, p1)
        s, e, w0, w1 = to_wall(s), to_wall(e), to_wall(w0), to_wall(w1)
    return {"s": s, "e": e, "w0": w0, "w1": w1, "rs": rs, "re": re, "timing": trace.meta.notes.get("timing")}


def compare(r: dict[str, Any], rs: np.ndarray, re: np.ndarray) -> dict[str, float]:
    ours = busy_in(r["s"], r["e"], r["w0"], r["w1"])
    theirs = busy_in(rs, re, r["w0"], r["w1"])
    rel = np.abs(ours - theirs) / np.maximum(theirs, 1)
    ds, de = edge_errors(r["s"], r["e"], rs, re)
    return {
        "busy_ours_ms": float(np.median(ours)) / 1e6,
        "busy_ref_ms": float(np.median(theirs)) / 1e6,
        "busy_err": float(np.median(rel)),
        "start_err_us": float(np.median(np.abs(ds))) / 1e3 if len(ds) else float("nan"),
        "end_err_us": float(np.median(np.abs(de))) / 1e3 if len(de) else float("nan"),
        "idle_counted_ms": covered_idle(r["s"], r["e"], rs, re) / 1e6 / max(len(r["w0"]), 1),
        "max_interval_ms": float((r["e"] - r["s"]).max()) / 1e6 if len(r["s"]) else 0.0,
        "max_ref_ms": float((re - rs).max()) / 1e6 if len(rs) else 0.0,
    }


def measure(name: str, out: Path | None) -> dict[str, dict[str, float]]:
    res: dict[str, dict[str, float]] = {}
    for timing in ("events", "cupti"):
        dest = (out / f"{name}.{timing}.cold.json.gz") if out else None
        step = step_fn(loop_steps(name))  # a new loop: its first step sets everything up
        r = record_steps(step, 3, timing, timing == "events", dest)
        if timing == "events":
            res[f"{timing} cold"] = compare(r, r["rs"], r["re"])
        else:  # exact by construction; compare with a reference of the next 3 steps (warm by then)
            res[f"{timing} cold"] = {"max_interval_ms": float((r["e"] - r["s"]).max()) / 1e6}
        for _ in range(10):
            step()
        sync()
        dest = (out / f"{name}.{timing}.json.gz") if out else None
        r = record_steps(step, 20, timing, timing == "events", dest)
        if timing == "cupti":
            ref = Reference()
            ref.start()
            for _ in range(20):
                step()
            sync()
            rs, re = ref.stop()
            # a different run of the same steps: GPU busy per step over all of each run's GPU work
            theirs = float(busy_in(rs, re, np.array([rs.min()]), np.array([re.max()]))[0]) / 20
            ours = float(busy_in(r["s"], r["e"], np.array([r["s"].min()]), np.array([r["e"].max()]))[0]) / 20
            res[f"{timing} warm"] = {
                "busy_ours_ms": ours / 1e6,
                "busy_ref_ms": theirs / 1e6,
                "busy_err": abs(ours - theirs) / max(theirs, 1),
                "start_err_us": 0.0,
                "end_err_us": 0.0,
            }
        else:
            res[f"{timing} warm"] = compare(r, r["rs"], r["re"])
        del step
    return res


def markdown(results: dict[str, dict[str, dict[str, float]]], device: str) -> str:
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    lines = [
        "## fidelity",
        "",
        f"{when}, {device}. GPU busy per step (median over steps) against CUPTI; events timing runs together "
        "with the CUPTI reference (same kernels), cupti timing is CUPTI itself and its busy time over 20 steps is "
        "compared with a reference run of the next 20 steps. Edge errors: median |start| / |end| error per "
        "interval. Idle counted: busy time per step the mode reports while CUPTI saw the GPU idle.",
        "",
        "| loop | mode | busy ours ms | busy CUPTI ms | busy error | start err us | end err us | idle counted ms "
        "| longest interval ms (CUPTI) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, modes in results.items():
        for mode, r in modes.items():

            def f(key: str, fmt: str = "{:.3f}", r: dict[str, float] = r) -> str:
                return fmt.format(r[key]) if key in r else ""

            longest = f"{f('max_interval_ms')} ({f('max_ref_ms')})" if "max_ref_ms" in r else f("max_interval_ms")
            lines.append(
                f"| {name} | {mode} | {f('busy_ours_ms')} | {f('busy_ref_ms')} | {f('busy_err', '{:.1%}')} | "
                f"{f('start_err_us', '{:.1f}')} | {f('end_err_us', '{:.1f}')} | {f('idle_counted_ms')} | {longest} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--md", type=Path)
    parser.add_argument("--out", type=Path, help="folder for the recorded traces")
    args = parser.parse_args()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in args.loops.split(","):
        results[name] = measure(name, args.out)
        print(name, {m: {k: round(v, 4) for k, v in r.items()} for m, r in results[name].items()}, flush=True)
    text = markdown(results, torch.cuda.get_device_name(0))
    print(text)
    if args.md:
        args.md.write_text(text)


if __name__ == "__main__":
    main()
