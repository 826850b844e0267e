"""Recording overhead on the GPU: wall time recorded / not recorded, same loop, same process.

Loops:
* ``overlap``: the built-in overlap demo (compute-bound training loop, two streams); target <= 1.03.
* ``launch-bound``: steps of 200 tiny ops (``x.add_(1)`` on 1024 floats, ~10 us each from Python); compared
  with torch.profiler (CPU + CUDA activities) on the same loop, and with recording every 10th step.

Segments alternate (plain, recorded, plain, recorded, ...) and the median of each is used; the recorder's
start (anchors) and stop (event resolution, trace building) are timed apart and not counted as loop time.
Prints a Markdown section (``## overhead``) and writes it to ``--md`` if given.

    PYTHONPATH=. python3 benchmarks/overhead.py --md /tmp/overhead.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _sync() -> None:
    import torch

    getattr(torch.cuda.synchronize, "__wrapped__", torch.cuda.synchronize)()


def _segment(step: Callable[[], None], steps: int, mode: str, every: int = 1) -> tuple[float, float]:
    """Run ``steps`` steps under ``mode`` (plain | record | profiler); (loop s, stop s)."""
    import torch

    from collector.recording.recorder import Recorder

    rec: Any = None
    prof: Any = None
    if mode == "record":
        rec = Recorder("bench", None, probe=False, every=every)
        rec.start()
    elif mode == "profiler":
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        prof = torch.profiler.profile(activities=acts)
        prof.__enter__()
    _sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
        if rec is not None:
            rec.step()
    _sync()
    loop = time.perf_counter() - t0
    t1 = time.perf_counter()
    if rec is not None:
        rec.stop()
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.events()  # the profiler's own post-processing, for the stop column
    return loop, time.perf_counter() - t1


def _compare(step: Callable[[], None], steps: int, modes: list[tuple[str, str, int]], rounds: int) -> dict[str, Any]:
    for _ in range(3):
        step()
    _sync()
    times: dict[str, list[float]] = {label: [] for label, _, _ in modes}
    stops: dict[str, list[float]] = {label: [] for label, _, _ in modes}
    for _ in range(rounds):
        for label, mode, every in modes:
            loop, stop = _segment(step, steps, mode, every)
            times[label].append(loop)
            stops[label].append(stop)
    base = statistics.median(times[modes[0][0]])
    return {
        label: {
            "ms_per_step": statistics.median(times[label]) * 1e3 / steps,
            "ratio": statistics.median(times[label]) / base,
            "stop_s": statistics.median(stops[label]),
            # what a user waits for: the loop plus the recorder's stop / the profiler's collection
            "e2e_ratio": statistics.median([t + s for t, s in zip(times[label], stops[label], strict=True)]) / base,
        }
        for label, _, _ in modes
    }


def overlap_step() -> Callable[[], None]:
    import torch

    from collector import demos

    batch, width, depth = demos.sizes(torch.cuda.get_device_properties(0).total_memory)
    loop: Iterator[None] = demos.overlap(demos.DemoContext(batch, width, depth))
    return lambda: next(loop)


def launch_bound_step(ops: int = 200) -> Callable[[], None]:
    import torch

    x = torch.zeros(1024, device="cuda")

    def step() -> None:
        for _ in range(ops):
            x.add_(1)

    return step


def per_op_costs(n: int = 4000) -> dict[str, float]:
    """Host us per tiny op (``x.add_(1)``): plain, through a pass-through dispatch mode, with two event
    records around it, and recorded."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from collector.recording.recorder import Recorder

    x = torch.zeros(1024, device="cuda")

    def loop() -> float:
        _sync()
        t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        _sync()
        return (time.perf_counter() - t0) * 1e6 / n

    class PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    out: dict[str, float] = {}
    loop()
    out["plain"] = min(loop() for _ in range(3))
    with PassThrough():
        out["pass-through dispatch mode"] = min(loop() for _ in range(3))
    stream = torch.cuda.current_stream()
    record = torch._C._CudaEventBase.record
    events = [torch.cuda.Event(enable_timing=True) for _ in range(2 * n)]

    def with_events() -> float:
        _sync()
        t0 = time.perf_counter()
        for i in range(n):
            record(events[2 * i], stream)
            x.add_(1)
            record(events[2 * i + 1], stream)
        _sync()
        return (time.perf_counter() - t0) * 1e6 / n

    with_events()
    out["two event records, no mode"] = min(with_events() for _ in range(3))
    times = []
    for _ in range(3):
        rec = Recorder("bench", None, probe=False)
        rec.start()
        times.append(loop())
        rec.stop()
    out["recorded"] = min(times)
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--md", help="write the Markdown section here")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    name = torch.cuda.get_device_name(0)
    overlap = _compare(overlap_step(), 60, [("plain", "plain", 1), ("recorded", "record", 1)], args.rounds)
    launch = _compare(
        launch_bound_step(),
        100,
        [
            ("plain", "plain", 1),
            ("recorded", "record", 1),
            ("recorded every 10th step", "record", 10),
            ("torch.profiler CPU+CUDA", "profiler", 1),
        ],
        args.rounds,
    )
    costs = per_op_costs()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## overhead",
        "",
        f"{when}, {name}, torch {torch.__version__}; `PYTHONPATH=. python3 benchmarks/overhead.py`. "
        f"Wall time of the same loop recorded / not recorded in one process, median of {args.rounds} "
        "alternating segments; `stop s` = the recorder's stop (event resolution + trace building) or the "
        "profiler's post-processing, outside the loop time; `ratio incl. stop` = (loop + stop) / plain loop, "
        "the wall time a user waits for.",
        "",
        "| loop | mode | ms/step | ratio (loop only) | stop s | ratio incl. stop |",
        "|---|---|---|---|---|---|",
    ]
    for loop_name, res in (("overlap demo (60 steps)", overlap), ("launch-bound, 200 x add_ (100 steps)", launch)):
        for label, r in res.items():
            lines.append(
                f"| {loop_name} | {label} | {r['ms_per_step']:.3f} | {r['ratio']:.3f} | {r['stop_s']:.2f} "
                f"| {r['e2e_ratio']:.3f} |"
            )
    target = overlap["recorded"]["ratio"] <= 1.03
    prof = launch["torch.profiler CPU+CUDA"]
    beat = launch["recorded"]["ratio"] < prof["ratio"]
    beat_e2e = launch["recorded"]["e2e_ratio"] < prof["e2e_ratio"]
    lines += [
        "",
        f"overlap ratio <= 1.03: {'yes' if target else 'NO'}; launch-bound recorded below "
        f"torch.profiler, loop only: {'yes' if beat else 'NO'}; including stop/collection: "
        f"{'yes' if beat_e2e else 'NO'}.",
        "",
    ]
    lines += ["Host cost per tiny op (`x.add_(1)`, best of 3 x 4000 ops):", "", "| path | us/op |", "|---|---|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in costs.items()]
    mode = costs["pass-through dispatch mode"] - costs["plain"]
    events = costs["two event records, no mode"] - costs["plain"]
    ours = costs["recorded"] - costs["plain"] - mode - events
    lines += [
        "",
        f"Per op, the design's floor is the Python dispatch mode (+{mode:.1f} us) plus two CUDA event records "
        f"(+{events:.1f} us); the recorder's own bookkeeping adds {ours:.1f} us. On a loop of ~{costs['plain']:.0f} us "
        "ops that cannot undercut torch.profiler's C++ callbacks + CUPTI when every step is recorded; "
        "`--every N` leaves the dispatch mode between sampled steps, so unrecorded steps cost nothing "
        "(every 10th step: see the table). Compute-bound loops hide the host cost entirely.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.md:
        Path(args.md).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
