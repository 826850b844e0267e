"""The recorder's host cost per op, by kind of op, against what its start-up calibration takes out.

The recorder times one tiny op (``x.fill_(1.0)``, one kernel launch) before and while recording and takes the
difference out of every recorded CUDA call (``notes.recorder_call_ns``; webapp.analysis.causal.fixes.
without_recorder). Framework loops read slower unrecorded-estimated than they run plain; this checks whether
other ops cost the recorder more per call than the fill does (cuBLAS, autograd, optimizers, copies).

For each op, in ``--rounds`` alternating rounds: its host time per call unrecorded, then inside a recording
(after the first step, so op naming is over), each the quickest of a few short timed runs, as the calibration
times its op (collector.recording.probe.op_ns). The recording's trace gives the CUDA calls each op makes that
the recorder keeps (launch rows) and the GPU ops they start. Printed per op: plain and recorded us per call,
the cost added, the cost the calibration would take out (calls x ``recorder_call_ns``), and their ratio (above
1: the replay leaves recorder cost in).

    cd benchmarks && python3 call_cost.py                      # every op, 3 rounds
    cd benchmarks && python3 call_cost.py --ops fill,mm,adamw  # some
    cd benchmarks && python3 call_cost.py --ops fill,mul-add --after-graph  # in a process holding a graph
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from collector.model import GPU_KINDS, IntervalKind, Trace
from collector.recording.probe import op_ns

OpMaker = Callable[[Any], Callable[[], Any]]


def _fill(torch: Any) -> Callable[[], Any]:
    x = torch.zeros(1, device="cuda")
    return lambda: x.fill_(1.0)


def _add(torch: Any) -> Callable[[], Any]:
    a, b = torch.ones(256, device="cuda"), torch.ones(256, device="cuda")
    return lambda: torch.add(a, b)


def _mul_add(torch: Any) -> Callable[[], Any]:
    t = torch.zeros(64, device="cuda")
    return lambda: t.mul_(0.999).add_(0.001)  # whatif_loops' tiny-ops-graph step, one of its 200 tensors


def _sum(torch: Any) -> Callable[[], Any]:
    a = torch.ones(4096, device="cuda")
    return lambda: a.sum()


def _mm(torch: Any) -> Callable[[], Any]:
    a = torch.ones(64, 64, device="cuda")
    return lambda: a @ a


def _mm_bf16(torch: Any) -> Callable[[], Any]:
    a = torch.ones(64, 64, device="cuda")

    def op() -> Any:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return a @ a

    return op


def _layer_norm(torch: Any) -> Callable[[], Any]:
    x = torch.ones(8, 256, device="cuda")
    return lambda: torch.nn.functional.layer_norm(x, (256,))


def _index(torch: Any) -> Callable[[], Any]:
    a = torch.ones(1024, 16, device="cuda")
    idx = torch.arange(0, 1024, 4, device="cuda")
    return lambda: a[idx]


def _foreach(torch: Any) -> Callable[[], Any]:
    xs = [torch.ones(128, device="cuda") for _ in range(8)]
    return lambda: torch._foreach_add_(xs, 1.0)


def _h2d(torch: Any) -> Callable[[], Any]:
    src = torch.ones(1024).pin_memory()
    return lambda: src.to("cuda", non_blocking=True)


def _backward(torch: Any) -> Callable[[], Any]:
    lin = torch.nn.Linear(64, 64, device="cuda")
    x = torch.ones(8, 64, device="cuda")

    def op() -> None:
        lin(x).sum().backward()

    return op


def _adamw(torch: Any) -> Callable[[], Any]:
    params = [torch.nn.Parameter(torch.ones(64, 64, device="cuda")) for _ in range(4)]
    for p in params:
        p.grad = torch.ones_like(p)
    opt = torch.optim.AdamW(params, lr=1e-3)
    return opt.step


OPS: dict[str, OpMaker] = {
    "fill": _fill,
    "add": _add,
    "mul-add": _mul_add,
    "sum": _sum,
    "mm": _mm,
    "mm-bf16": _mm_bf16,
    "layer-norm": _layer_norm,
    "index": _index,
    "foreach": _foreach,
    "h2d": _h2d,
    "backward": _backward,
    "adamw": _adamw,
}
"""Ops on small CUDA tensors (launch-bound), named; ``fill`` is the calibration's own op."""


def per_call(trace: Trace, calls: int) -> tuple[float, float]:
    """(CUDA calls the recorder kept, GPU ops they started) per call of the op, from a recording of ``calls``
    calls (its start-up calibration's rows are already dropped)."""
    kind = trace.intervals["kind"].astype(str).to_numpy()
    launches = int(np.sum(kind == IntervalKind.LAUNCH.value))
    gpu = int(np.isin(kind, [k.value for k in GPU_KINDS]).sum())
    return launches / max(calls, 1), gpu / max(calls, 1)


@dataclass(frozen=True)
class OpCost:
    """One op's figures, median over rounds (ns per call of the op)."""

    name: str
    plain_ns: float
    recorded_ns: float
    cuda_calls: float
    gpu_ops: float
    call_ns: float
    """The recording's calibrated cost per CUDA call (``notes.recorder_call_ns``)."""

    @property
    def added_ns(self) -> float:
        return self.recorded_ns - self.plain_ns

    @property
    def taken_out_ns(self) -> float:
        """What the replay takes out of this op's host time: its kept CUDA calls x the calibrated cost."""
        return self.cuda_calls * self.call_ns

    @property
    def left_in(self) -> float:
        """Added over taken out (1: the calibration covers this op; above 1: recorder cost left in the
        unrecorded estimate)."""
        return self.added_ns / self.taken_out_ns if self.taken_out_ns > 0 else float("nan")


def median_cost(name: str, rounds: list[tuple[float, float, float, float, float]]) -> OpCost:
    """An :class:`OpCost` from rounds of (plain ns, recorded ns, CUDA calls per op, GPU ops per op, call ns)."""
    cols = list(zip(*rounds, strict=True))
    return OpCost(name, *(float(statistics.median(c)) for c in cols))


def measure(names: list[str], rounds: int, calls: int, reps: int) -> list[OpCost]:
    """Each named op, ``rounds`` rounds of (plain timing, recorded timing in a fresh recording)."""
    import torch

    from collector.recording.api import record

    out = []
    for name in names:
        op = OPS[name](torch)
        per_round = []
        for _ in range(rounds):
            plain = op_ns(op, calls, reps)
            rec = record("call-cost", None, probe=False, auto_steps=False)
            rec.start()
            rec.step()  # the first step ends op naming; the timed calls are the second step's
            recorded = op_ns(op, calls, reps)
            trace = rec.stop()
            made = 20 + calls * reps
            cuda_calls, gpu_ops = per_call(trace, made)
            call_ns = float((trace.meta.notes or {}).get("recorder_call_ns", 0) or 0)
            per_round.append((plain, recorded, cuda_calls, gpu_ops, call_ns))
        out.append(median_cost(name, per_round))
    return out


def table(costs: list[OpCost]) -> list[str]:
    """The markdown table of :func:`measure`'s figures."""
    lines = [
        "| op | plain us | recorded us | added us | CUDA calls kept | GPU ops | calibrated us/call | taken out us "
        "| added / taken out |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in costs:
        lines.append(
            f"| {c.name} | {c.plain_ns / 1e3:.2f} | {c.recorded_ns / 1e3:.2f} | {c.added_ns / 1e3:.2f} | "
            f"{c.cuda_calls:.2f} | {c.gpu_ops:.2f} | {c.call_ns / 1e3:.2f} | {c.taken_out_ns / 1e3:.2f} | "
            f"{c.left_in:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, of {', '.join(OPS)}")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=64, help="calls per timed run")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per timing (the quickest is kept)")
    parser.add_argument(
        "--after-graph",
        action="store_true",
        help="capture whatif_loops' tiny-ops-graph step as a CUDA graph first (the process then holds a graph, "
        "as that pair's process does when it records its base loop)",
    )
    args = parser.parse_args()
    names = [n for n in args.ops.split(",") if n]
    unknown = [n for n in names if n not in OPS]
    if unknown:
        parser.error(f"unknown ops: {', '.join(unknown)}")
    import torch

    if not torch.cuda.is_available():
        parser.exit(2, "call_cost.py: needs a CUDA GPU (it times ops on it, recorded and not)\n")
    if args.after_graph:
        from whatif_loops import tiny_ops_graph

        graphed = tiny_ops_graph(True)  # kept alive: its graph stays captured while the ops are timed
        graphed.run(3)
        print("after a CUDA graph was captured in this process (whatif_loops' tiny-ops-graph, fixed)")
    print("\n".join(table(measure(names, args.rounds, args.calls, args.reps))))


if __name__ == "__main__":
    main()
