"""Hand-built runs for the comparison tests (analysis, pages, reports): a blocking pageable copy per step.

On 2 s steps a 12 ms copy costs 0.6% of the step, so its findings are listed; an 8 ms one costs 0.4%, below
the listing threshold (webapp.analysis.rules.base.LIST_FRAC): the same findings, minor.
"""

from __future__ import annotations

from collector.model import Interval, IntervalKind, Lane, LaneKind, Marker, MarkerKind, MemoryKind, RunMeta, Trace

US = 1_000
MS = 1_000_000
LISTED_COPY_NS = 12 * MS
MINOR_COPY_NS = 8 * MS


def copy_run(copy_ns: int = LISTED_COPY_NS, step_ns: int = 2000 * MS, n_steps: int = 2) -> Trace:
    """Per step: a blocking pageable H2D copy of ``copy_ns`` (64 MiB per 12 ms), then one kernel to the step's
    end; ``n_steps`` steps of ``step_ns``."""
    cpu, compute = 0, 1
    rows: list[Interval] = []
    for k in range(n_steps):
        t, done = k * step_ns, k * step_ns + copy_ns
        rows += [
            Interval(cpu, IntervalKind.SYNC_WAIT, "aten::to", t, done + 10 * US, cause="blocking_copy", id=10 * k),
            Interval(
                compute,
                IntervalKind.MEMCPY_H2D,
                "Memcpy HtoD (Pageable -> Device)",
                t,
                done,
                bytes=(64 << 20) * copy_ns // (12 * MS),
                memory_kind=MemoryKind.PAGEABLE,
                launch_id=10 * k,
                id=10 * k + 1,
            ),
            Interval(cpu, IntervalKind.LAUNCH, "cudaLaunchKernel", done + 10 * US, done + 15 * US, id=10 * k + 2),
            Interval(
                compute, IntervalKind.KERNEL, "gemm", done + 20 * US, t + step_ns, launch_id=10 * k + 2, id=10 * k + 3
            ),
        ]
    lanes = [
        Lane(0, LaneKind.CPU_THREAD, 100, "main"),
        Lane(0, LaneKind.COMPUTE_STREAM, 7, "stream 7"),
        Lane(0, LaneKind.TRANSFER_STREAM, 13, "stream 13"),
    ]
    marks = [Marker(0, MarkerKind.STEP, f"step {k}", k * step_ns, (k + 1) * step_ns, k) for k in range(n_steps)]
    meta = RunMeta(source="test", bandwidth_probe={"h2d_pinned_gbps": 53.7, "h2d_pageable_gbps": 5.6})
    return Trace.build(meta, lanes, rows, marks)
