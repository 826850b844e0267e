"""What the CUPTI recorder's overhead is made of, per loop: its parts switched off one at a time.

Modes, in alternating segments of ``--steps`` steps (median of ``--rounds``), each a ratio to ``plain``:

* ``client``: our CUPTI client alone (every activity kind the recorder enables, no recorder);
* ``client:<kinds>``: the client with some activity kinds only (``kernel``, ``+copy``, ``+runtime``, ``+driver``);
* ``rec``: the recorder as a user runs it; ``rec-nonaming``: without naming the first step's ops;
  ``rec-nohooks``: without its Python hooks (waits, copies, ranges); ``rec-bare``: without either;
* ``prof-cuda``: torch.profiler with the CUDA activity only.

Also prints the first step's ms per mode (the op naming runs there). Needs a CUDA GPU.

    cd benchmarks && python3 overhead_parts.py --loops transformer-small,tiny-ops
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from regimes import loop_steps, step_fn, sync

from collector.recording import client_capture, cupti_client, cupti_recorder

KIND_SETS = {
    "kernel": (cupti_client.CONCURRENT_KERNEL,),
    "+copy": (cupti_client.CONCURRENT_KERNEL, cupti_client.MEMCPY, cupti_client.MEMSET),
    "+runtime": (cupti_client.CONCURRENT_KERNEL, cupti_client.MEMCPY, cupti_client.MEMSET, cupti_client.RUNTIME),
    "+driver": (
        cupti_client.CONCURRENT_KERNEL,
        cupti_client.MEMCPY,
        cupti_client.MEMSET,
        cupti_client.RUNTIME,
        cupti_client.DRIVER,
    ),
}
MODES = ("plain", "client", *(f"client:{k}" for k in KIND_SETS), "rec", "rec-nonaming", "rec-nohooks", "rec-bare")
MODES += ("prof-cuda",)


@contextmanager
def recorder_without(naming: bool, hooks: bool) -> Iterator[None]:
    """The recorder with op naming and/or its Python hooks switched off, for the duration."""
    start, spans, ranges = client_capture.ClientCapture.start, cupti_recorder.hostspans, cupti_recorder.ranges
    saved = (spans.install, spans.install_masked, ranges.install)
    if not naming:
        client_capture.ClientCapture.start = lambda self, naming=True: start(self, naming=False)  # type: ignore[method-assign]
    if not hooks:
        spans.install = spans.install_masked = ranges.install = lambda *args: lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        client_capture.ClientCapture.start = start  # type: ignore[method-assign]
        spans.install, spans.install_masked, ranges.install = saved


def segment(step: Callable[[], None], steps: int, mode: str) -> tuple[float, float]:
    """(seconds for ``steps`` steps, seconds for the first) under ``mode``."""
    import torch

    from collector.recording.api import record

    stop: Callable[[], Any] = lambda: None  # noqa: E731
    kinds = cupti_client.KINDS
    naming, hooks = mode not in ("rec-nonaming", "rec-bare"), mode not in ("rec-nohooks", "rec-bare")
    rec: Any = None
    with recorder_without(naming=naming, hooks=hooks):
        if mode.startswith("client"):
            cupti_client.KINDS = KIND_SETS[mode.split(":")[1]] if ":" in mode else kinds
            client = cupti_client.CuptiClient()
            client.start()
            stop = client.stop
        elif mode.startswith("rec"):
            rec = record("parts", None, probe=False)
            rec.start()
            stop = rec.stop
        elif mode == "prof-cuda":
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            prof.start()
            stop = prof.stop
        sync()
        t0 = time.perf_counter()
        first = 0.0
        for i in range(steps):
            step()
            if rec is not None:
                rec.step()
            if i == 0:
                first = time.perf_counter() - t0
        sync()
        loop = time.perf_counter() - t0
        stop()
    cupti_client.KINDS = kinds
    return loop, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="transformer-small,tiny-ops,convnet")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for name in args.loops.split(","):
        step = step_fn(loop_steps(name))
        for _ in range(10):
            step()
        sync()
        loops: dict[str, list[float]] = {m: [] for m in MODES}
        firsts: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                loop, first = segment(step, args.steps, mode)
                loops[mode].append(loop)
                firsts[mode].append(first)
        base = statistics.median(loops["plain"])
        print(f"{name}: plain {base / args.steps * 1e3:.3f} ms/step")
        for mode in MODES:
            ratio = statistics.median(loops[mode]) / base
            print(f"  {mode:18s} {ratio:.3f}x   first step {statistics.median(firsts[mode]) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
