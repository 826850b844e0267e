"""Does a process run as fast after a recording as before it? Once attached, CUPTI slows every later kernel
launch of the process even with nothing enabled; the recorder's own reader detaches it when a recording stops
(collector.recording.client_capture.may_detach). In one process: a launch-bound loop (200 tensors of 64 floats
updated in place, 400 launches a step) timed before any recording, after a recording that leaves CUPTI
attached (the detach switched off), and after one that detaches it; each timing the loop's 10th-percentile
step, and its ratio to the first. Run on a GPU:

    PYTHONPATH=. python3 benchmarks/after_stop.py [--steps 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def quick_step_ms(body: Callable[[], None], steps: int) -> float:
    """The loop's 10th-percentile step, ms (host time; the GPU keeps up with 400 tiny kernels)."""
    import torch

    for _ in range(5):
        body()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        body()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return sorted(times)[len(times) // 10] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torch

    from collector.recording import client_capture
    from collector.recording.api import record

    ts = [torch.zeros(64, device="cuda") for _ in range(200)]

    def body() -> None:
        for t in ts:
            t.mul_(0.999).add_(0.001)

    def recorded(detach: bool) -> bool:
        real = client_capture.may_detach
        client_capture.may_detach = lambda *_: detach
        try:
            rec = record("after-stop", None, probe=False, timing="cupti")
            rec.start()
            for _ in range(20):
                body()
            rec.stop()
        finally:
            client_capture.may_detach = real
        return rec.reader == "client"

    before = quick_step_ms(body, args.steps)
    rows: dict[str, list[float]] = {"attached": [], "detached": []}
    for _ in range(max(args.rounds, 1)):  # each round: attached (no detach), then detached
        if not recorded(detach=False):
            raise SystemExit("CUPTI was read through Kineto: nothing of ours to detach")
        rows["attached"].append(quick_step_ms(body, args.steps) / before)
        recorded(detach=True)
        rows["detached"].append(quick_step_ms(body, args.steps) / before)
    print(f"{torch.cuda.get_device_name(0)}: the loop before any recording {before:.3f} ms a step (10th percentile)")
    for label, ratios in rows.items():
        each = ", ".join(f"{r:.3f}x" for r in ratios)
        print(f"after a recording that leaves CUPTI {label}: {statistics.median(ratios):.3f}x (rounds: {each})")


if __name__ == "__main__":
    main()
