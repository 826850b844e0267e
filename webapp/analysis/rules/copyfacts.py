"""Facts about copies that the copy rules share: which copies, which waits held the host for them, and
what a non-blocking copy call costs the host."""

from __future__ import annotations

import numpy as np

from collector.model import IntervalKind
from webapp.analysis.causal.graph import COPY
from webapp.analysis.context import COPY_SYNC_CAUSES
from webapp.analysis.rules.base import MIN_COPY_BYTES, RuleContext

FALLBACK_PINNED_SPEEDUP = 2.0
"""Without a bandwidth probe or pinned copies to measure, assume pinned copies run only 2x faster than
pageable ones (10x measured on an H200): a deliberately modest estimate."""
COLLECTIVE_CAUSE = "collective"
"""The cause the recorder gives the waits and copies a collective makes on its own threads."""
DEFAULT_CALL_NS = 10_000
"""Host time of an asynchronous copy call where the trace has none to measure, ns."""


def copies(
    ctx: RuleContext, kind: IntervalKind | None = None, memory: str | None = None, big: bool = True
) -> np.ndarray:
    """GPU ops (graph indices) that are copies inside the steps, optionally of one kind and host memory."""
    g, rd = ctx.graph, ctx.rd
    rows = g.g_row
    sel = (g.g_class == COPY) & (ctx.gpu_win() >= 0)
    if big:
        sel &= g.g_bytes >= MIN_COPY_BYTES
    if kind is not None:
        sel &= rd.kind[rows] == rd.code(kind)
    if memory is not None:
        sel &= rd.mem[rows] == rd.mem_code(memory)
    ops = np.flatnonzero(sel)
    # a collective's own staging copies (gloo with CUDA tensors) are the communication's, not the user's
    return ops[ctx.column("cause", rows[ops]) != COLLECTIVE_CAUSE] if len(ops) else ops


def waits_for(ctx: RuleContext, ops: np.ndarray) -> np.ndarray:
    """Host waits (graph indices) that held the host for these copies: the copy call itself where it
    blocked, and the copy's own synchronize (a copy cause) that waited for it."""
    g = ctx.graph
    if not len(ops):
        return np.zeros(0, dtype=np.int64)
    launch = g.g_launch[ops]
    own = launch[(launch >= 0) & g.h_sync[np.maximum(launch, 0)]]
    waits = np.flatnonzero(g.h_sync & np.isin(g.w_target, ops))
    if len(waits):
        cause = ctx.column("cause", g.h_row[waits])
        waits = waits[np.isin(cause, list(COPY_SYNC_CAUSES))]
    return np.unique(np.concatenate((own, waits)))


def call_ns(ctx: RuleContext) -> int:
    """Host time of an asynchronous copy call (median of the trace's non-blocking copy calls), ns."""
    g = ctx.graph
    calls = np.flatnonzero(~g.h_wait)
    if len(calls):
        mine = calls[ctx.rd.matches("name", g.h_row[calls], lambda n: n == "cudaMemcpyAsync")]
        if len(mine):
            return int(np.median(g.h_end[mine] - g.h_start[mine]))
    return DEFAULT_CALL_NS


def pinned_rate(ctx: RuleContext, ops: np.ndarray) -> tuple[float, bool]:
    """Pinned bandwidth to replay copies with (GB/s) and whether it was measured (else the fallback)."""
    if ctx.pinned_gbps == ctx.pinned_gbps and ctx.pinned_gbps > 0:
        return ctx.pinned_gbps, True
    g = ctx.graph
    achieved = g.g_bytes[ops].sum() / max(int(g.g_dur[ops].sum()), 1)
    return float(achieved * FALLBACK_PINNED_SPEEDUP), False
