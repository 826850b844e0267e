"""The synthetic DDP job under gloo with CUDA tensors (collector.synthetic.gloo_cuda), each rank's capture built into
a trace as the recorder builds it, for the tests of ranks, lanes and pages."""

from __future__ import annotations

from collector.importers.kineto import trace_from_kineto
from collector.model import RunMeta, Trace
from collector.recording.comm import CollectiveCall
from collector.recording.commjoin import Threads, join_comm
from collector.recording.enrich import HostFacts, enrich
from collector.synthetic.gloo_cuda import MAIN, Rank


def rank_trace(rank: Rank, calls: list[CollectiveCall] | None, backend: str = "gloo") -> Trace:
    """One rank's trace as the recorder builds it from the capture: imported, its steps and main thread
    marked (collector.recording.enrich), its collectives joined from the flight recorder's ``calls`` (None:
    none could be read; collector.recording.commjoin)."""
    raw = trace_from_kineto(rank.table, by_start=True)
    markers = [("step", f"step {i}", a, b, i) for i, (a, b) in enumerate(rank.steps)]
    facts = HostFacts(markers=markers, threads={MAIN: "main thread"})
    trace = enrich(raw, facts, RunMeta.new(workload="ddp", clock="unix_ns", notes={"timing": "cupti"}))
    return join_comm(trace, calls, Threads(python=frozenset({MAIN})), backend)
