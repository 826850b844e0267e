"""What the CUPTI recorder's overhead is made of, per loop: its parts switched off one at a time.

Modes, in alternating segments of ``--steps`` steps (median of ``--rounds``), each a ratio to ``plain``:

* ``client``: our CUPTI client alone (every activity kind the recorder enables, no recorder);
* ``client:<kinds>``: the client with some activity kinds only (``kernel``, ``+copy``, ``+runtime``, ``+driver``);
* ``rec``: the recorder as a user runs it; ``rec-nonaming``: without naming the first step's ops;
  ``rec-nohooks``: without its Python hooks (waits, copies, ranges); ``rec-bare``: without either;
  ``rec-nostacks``: without sampling the Python stack; ``rec-nogc``: without timing garbage collections;
* ``prof-cuda``: torch.profiler with the CUDA activity only.

Also prints the first step's ms per mode (the op naming runs there). ``--pairs`` runs the base loops of
whatif_loops' pairs instead (framework loops such as a Lightning or Hugging Face Trainer's), each mode one
``run`` of the pair's steps timed as the loop times itself (a Trainer's median step), with the steps marked
for the recorder as whatif_truth marks them. Needs a CUDA GPU.

    cd benchmarks && python3 overhead_parts.py --loops transformer-small,tiny-ops
    cd benchmarks && python3 overhead_parts.py --pairs lightning-mlp --modes rec,rec-nostacks,rec-nogc,rec-bare
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from regimes import loop_steps, step_fn, sync

from collector.recording import client_capture, cupti_client, cupti_recorder, gcspans

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
MODES += ("rec-nostacks", "rec-nogc", "prof-cuda")


@contextmanager
def recorder_without(naming: bool, hooks: bool, gc_spans: bool = True) -> Iterator[None]:
    """The recorder with op naming, its Python hooks and/or its timing of garbage collections switched off, for
    the duration."""
    start, spans, ranges = client_capture.ClientCapture.start, cupti_recorder.hostspans, cupti_recorder.ranges
    saved = (spans.install, spans.install_masked, ranges.install)
    install_gc = gcspans.GcSpans.install
    if not naming:
        client_capture.ClientCapture.start = lambda self, naming=True: start(self, naming=False)  # type: ignore[method-assign]
    if not hooks:
        spans.install = spans.install_masked = ranges.install = lambda *args: lambda: None  # type: ignore[assignment]
    if not gc_spans:
        gcspans.GcSpans.install = lambda self: lambda: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        client_capture.ClientCapture.start = start  # type: ignore[method-assign]
        spans.install, spans.install_masked, ranges.install = saved
        gcspans.GcSpans.install = install_gc  # type: ignore[method-assign]


def _switches(mode: str) -> dict[str, bool]:
    """What ``mode`` switches off, as :func:`recorder_without`'s arguments."""
    return {
        "naming": mode not in ("rec-nonaming", "rec-bare"),
        "hooks": mode not in ("rec-nohooks", "rec-bare"),
        "gc_spans": mode != "rec-nogc",
    }


def pair_segment(loop: Any, steps: int, mode: str, auto_steps: bool = True) -> float:
    """One ``loop.run(steps)`` under ``mode`` (a whatif_loops base loop, or a step function as :class:`Steps`),
    the recorder's steps marked by the loop's ``on_step`` (and, with ``auto_steps``, after each optimizer step,
    as whatif_truth records): what the loop's ``run`` returns (a framework's median step, a plain loop's mean
    after its warm-up)."""
    import torch

    from collector.recording.api import record

    kinds = cupti_client.KINDS
    try:
        with recorder_without(**_switches(mode)):
            if mode.startswith("client"):
                cupti_client.KINDS = KIND_SETS[mode.split(":")[1]] if ":" in mode else kinds
                client = cupti_client.CuptiClient()
                client.start()
                try:
                    return float(loop.run(steps))
                finally:
                    client.stop()
            if mode.startswith("rec"):
                rec = record("parts", None, probe=False, auto_steps=auto_steps, stacks=mode != "rec-nostacks")
                rec.start()
                try:
                    return float(loop.run(steps, on_step=rec.step))
                finally:
                    rec.stop()
            if mode == "prof-cuda":
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
                    return float(loop.run(steps))
            return float(loop.run(steps))
    finally:
        cupti_client.KINDS = kinds


class Steps:
    """A step function run as a loop: ``run(n, on_step)`` is the seconds of ``n`` steps (the GPU synchronized on
    both sides), ``on_step`` called after each; the first step's seconds are kept in ``first``."""

    def __init__(self, step: Callable[[], None]) -> None:
        self.step, self.first = step, 0.0

    def run(self, n: int, on_step: Callable[[], None] | None = None) -> float:
        sync()
        t0 = time.perf_counter()
        for i in range(n):
            self.step()
            if on_step is not None:
                on_step()
            if i == 0:
                self.first = time.perf_counter() - t0
        sync()
        return time.perf_counter() - t0


def segment(step: Callable[[], None], steps: int, mode: str) -> tuple[float, float]:
    """(seconds for ``steps`` steps, seconds for the first) under ``mode``."""
    loop = Steps(step)
    return pair_segment(loop, steps, mode, auto_steps=False), loop.first


def run_pairs(names: list[str], modes: list[str], rounds: int) -> None:
    """Each named pair's base loop under every mode, ``rounds`` alternating rounds, medians against plain."""
    import gc

    from whatif_loops import PAIRS

    by_name = {p.name: p for p in PAIRS}
    for name in names:
        pair = by_name[name]
        loop = pair.make(False)
        try:
            loop.run(min(pair.steps, 8))
            per: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(rounds):
                for mode in modes:
                    gc.collect()  # every segment starts from the same collector state (as whatif_truth's timings)
                    per[mode].append(pair_segment(loop, pair.steps, mode))
        finally:
            loop.close()
        base = statistics.median(per["plain"])
        print(f"{name}: plain {base * 1e3:.3f} ms/step ({pair.steps} steps a segment)")
        for mode in modes:
            each = ", ".join(f"{t * 1e3:.2f}" for t in per[mode])
            print(f"  {mode:18s} {statistics.median(per[mode]) / base:.3f}x   ms/step {each}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default="transformer-small,tiny-ops,convnet")
    parser.add_argument("--pairs", default="", help="whatif_loops pairs whose base loops to run instead of --loops")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    modes = ["plain", *(m for m in args.modes.split(",") if m and m != "plain")]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        parser.error(f"unknown modes: {', '.join(unknown)}")
    if args.pairs:
        run_pairs(args.pairs.split(","), modes, args.rounds)
        return
    for name in args.loops.split(","):
        step = step_fn(loop_steps(name))
        for _ in range(10):
            step()
        sync()
        loops: dict[str, list[float]] = {m: [] for m in modes}
        firsts: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for mode in modes:
                loop, first = segment(step, args.steps, mode)
                loops[mode].append(loop)
                firsts[mode].append(first)
        base = statistics.median(loops["plain"])
        print(f"{name}: plain {base / args.steps * 1e3:.3f} ms/step")
        for mode in modes:
            ratio = statistics.median(loops[mode]) / base
            print(f"  {mode:18s} {ratio:.3f}x   first step {statistics.median(firsts[mode]) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
