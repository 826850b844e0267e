"""What sampling the host's Python stacks costs a loop: the recorder's in-process sampler against py-spy
(out of process, ``--nonblocking``: it reads the stacks with ptrace and never takes the GIL), same loop, same
process, alternating segments. Run on a GPU, with py-spy installed for its column:

    PYTHONPATH=. python3 benchmarks/stack_sampling.py --md /tmp/stacks.md [--loops tiny-ops,transformer-small]

Per loop and round: ms per step unsampled, with the in-process sampler (200 Hz) and with py-spy (200 Hz); the
ratios' median over rounds, lowest and highest round. Prints a Markdown section (``## stack_sampling``).
``--pairs`` adds the framework loops of benchmarks/whatif_loops.py (a Hugging Face Trainer, Lightning), whose
deep stacks of long functions are what a sample's cost grows with.

``--sample-cost`` needs no GPU: the host time of one sample of a stack of 40 frames of 800-line functions,
taken as the sampler takes it (code and instruction offset per frame) and reading each frame's line number
as it did before (``f_lineno`` scans the code's line table from its start):

    python3 benchmarks/stack_sampling.py --sample-cost

``--loops host-cpu`` needs no GPU either: a host-bound step of tiny torch CPU ops and Python calls at the
bottom of a deep stack of long functions (a framework's host work, as a sample sees it), the loop where
sampling costs most; run alone (``--loops host-cpu``) it weighs both samplers on any machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from types import FrameType
from typing import Any

from regimes import loop_steps, step_fn, sync

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RATE_HZ = 200


def _segment(step, steps: int, wait: Callable[[], None] = sync) -> float:  # type: ignore[no-untyped-def]
    step()
    wait()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    wait()
    return (time.perf_counter() - t0) / steps * 1e3


HOST_DEPTH, HOST_LINES, HOST_OPS = 30, 300, 200
CPU_LOOPS = ("host-cpu",)
"""Loops that need no GPU (their steps wait for nothing)."""


def host_cpu_step() -> Callable[[], None]:
    """A host-bound step without a GPU: HOST_OPS tiny torch CPU ops, each after a Python call, at the bottom of a
    stack of HOST_DEPTH frames of HOST_LINES-line functions."""
    import torch

    layer = deep_function("layer", HOST_LINES, "host_cpu.py")
    a, b = torch.ones(16), torch.ones(16)

    def work() -> None:
        for i in range(HOST_OPS):
            torch.add(a, b, alpha=float(i % 3))

    return lambda: layer(HOST_DEPTH, work)


def deep_function(name: str, lines: int, filename: str) -> Callable[[int, Callable[[], None]], None]:
    """A generated function ``name(n, call)`` of ``lines`` lines of arithmetic that calls itself ``n`` times
    more and then ``call()``: a stack of n + 1 frames of long functions (a framework's, as a sample sees it),
    its code from ``filename``."""
    body = "\n".join(f"    v{i} = {i} + 1" for i in range(lines))
    source = f"def {name}(n, call):\n{body}\n    if n == 0:\n        return call()\n    return {name}(n - 1, call)\n"
    names: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), names)  # noqa: S102 - a generated function of known text
    return names[name]  # type: ignore[no-any-return]


RATES: dict[str, list[float]] = {"own": [], "py-spy": []}
"""Samples per second each sampler took in each segment (asked: RATE_HZ)."""


def _with_sampler(run: Callable[[], float]) -> float:
    """``run()`` (a timed segment) with the in-process sampler sampling."""
    from collector.recording.stacks import StackSampler

    sampler = StackSampler(interval_s=1 / RATE_HZ).start()
    t0 = time.perf_counter()
    try:
        return run()
    finally:
        RATES["own"].append(sampler.samples / (time.perf_counter() - t0))
        sampler.stop()


def raw_samples(path: str) -> int:
    """Samples in a py-spy ``--format raw`` file (folded stacks, each line ending in its count); 0 if none."""
    try:
        with open(path) as f:
            return sum(int(line.rsplit(" ", 1)[1]) for line in f if line.strip())
    except (OSError, ValueError, IndexError):
        return 0


def _with_pyspy(step, steps: int, out: str, wait: Callable[[], None] = sync) -> float | str:  # type: ignore[no-untyped-def]
    exe = shutil.which("py-spy")
    if exe is None:
        return "py-spy not installed"
    proc = subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(os.getpid()),
            "--rate",
            str(RATE_HZ),
            "--nonblocking",
            "--format",
            "raw",
            "-o",
            out,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # attached
    if proc.poll() is not None:
        return "py-spy could not attach: " + (proc.stderr.read() if proc.stderr else "").strip().splitlines()[-1:][0]
    t0 = time.perf_counter()
    try:
        return _segment(step, steps, wait)
    finally:
        took = time.perf_counter() - t0
        proc.send_signal(signal.SIGINT)  # py-spy writes what it sampled on an interrupt (not on SIGTERM)
        proc.wait(timeout=10)
        RATES["py-spy"].append(raw_samples(out) / took)  # an idle wait of the attach is not sampled


def _pair_loop(name: str):  # type: ignore[no-untyped-def]
    """A whatif_loops pair's base loop (its ``run(n)`` times n steps itself) and its steps per timing."""
    from whatif_loops import PAIRS

    pair = next(p for p in PAIRS if p.name == name)
    return pair.make(False), pair.steps


FRAMES, BODY_LINES, REPEATS = 40, 800, 200


def sample_cost() -> str:
    """Microseconds a sample holds the GIL on a stack of FRAMES frames of BODY_LINES-line functions: as the
    sampler walks it, and reading each frame's line number on the way (the walk before)."""
    from collector.recording.stacks import MAX_DEPTH, stack_key

    deep = deep_function("deep", BODY_LINES, "deep.py")
    took: dict[str, float] = {}

    def probe() -> None:
        frame = sys._getframe()
        t0 = time.perf_counter_ns()
        for _ in range(REPEATS):
            stack_key(frame)
        t1 = time.perf_counter_ns()
        for _ in range(REPEATS):
            walked: list[tuple[object, int]] = []
            f: FrameType | None = frame
            while f is not None and len(walked) < MAX_DEPTH:
                walked.append((f.f_code, f.f_lineno))
                f = f.f_back
        t2 = time.perf_counter_ns()
        took.update(offsets=(t1 - t0) / REPEATS / 1e3, lines=(t2 - t1) / REPEATS / 1e3)

    deep(FRAMES, probe)
    return (
        f"one sample of {FRAMES} frames of {BODY_LINES}-line functions (Python {sys.version.split()[0]}): "
        f"{took['offsets']:.1f} us as the sampler takes it, {took['lines']:.1f} us reading line numbers "
        f"({took['lines'] / max(took['offsets'], 1e-9):.0f}x)"
    )


def _ratio(xs: list[float], plain: list[float], why: str, rates: list[float] | None = None) -> str:
    if not xs:
        return why or "-"
    r = [x / p for x, p in zip(xs, plain, strict=False)]
    taken = f", {statistics.median(rates):.0f} samples/s" if rates else ""
    return f"{statistics.median(r):.3f}x ({min(r):.2f}-{max(r):.2f}){taken}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", default="tiny-ops,transformer-small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", default="", help="framework loops of whatif_loops.py, e.g. hf-trainer-gpt2")
    parser.add_argument("--md", type=Path)
    parser.add_argument("--sample-cost", action="store_true", help="one sample's host time, no GPU needed")
    args = parser.parse_args()
    if args.sample_cost:
        print(sample_cost())
        return
    import torch

    out = tempfile.mktemp(suffix=".txt")
    rows = []
    for name in filter(None, args.pairs.split(",")):
        loop, steps = _pair_loop(name)
        try:
            loop.run(min(steps, 8))
            plain, own = [], []
            for _ in range(args.rounds):
                plain.append(float(loop.run(steps)) * 1e3)
                own.append(_with_sampler(lambda loop=loop, steps=steps: float(loop.run(steps)) * 1e3))
        finally:
            loop.close()
        rows.append(f"| {name} | {statistics.median(plain):.3f} | {_ratio(own, plain, '')} | not run |")
        print(rows[-1], flush=True)
    for name in filter(None, args.loops.split(",")):
        on_cpu = name in CPU_LOOPS
        step = host_cpu_step() if on_cpu else step_fn(loop_steps(name))
        wait = (lambda: None) if on_cpu else sync
        for _ in range(3):
            _segment(step, 20, wait)
        plain, own, spy, why = [], [], [], ""
        RATES["own"].clear()
        RATES["py-spy"].clear()
        for _ in range(args.rounds):
            plain.append(_segment(step, args.steps, wait))
            own.append(_with_sampler(lambda step=step, wait=wait: _segment(step, args.steps, wait)))
            got = _with_pyspy(step, args.steps, out, wait)
            if isinstance(got, str):
                why = got
            else:
                spy.append(got)

        rows.append(
            f"| {name} | {statistics.median(plain):.3f} | {_ratio(own, plain, why, RATES['own'])} | "
            f"{_ratio(spy, plain, why, RATES['py-spy'])} |"
        )
        print(rows[-1], flush=True)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = torch.cuda.get_device_name(0) if torch.cuda.is_available() else f"{os.cpu_count()} CPUs, no GPU"
    text = "\n".join(
        [
            "## stack_sampling",
            "",
            f"Measured {when} on {machine} (`PYTHONPATH=. python3 benchmarks/stack_sampling.py`, "
            f"{args.rounds} alternating rounds of {args.steps} steps, {RATE_HZ} Hz). Ratio = ms per step sampled over "
            "the same round's unsampled segment.",
            "",
            "| loop | plain ms/step | in-process sampler | py-spy --nonblocking |",
            "|---|---|---|---|",
            *rows,
        ]
    )
    print(text)
    if args.md:
        args.md.write_text(text + "\n")


if __name__ == "__main__":
    main()
