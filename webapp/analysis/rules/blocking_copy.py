"""blocking-copy: uploads the host waited for although their memory allows an asynchronous copy."""

from __future__ import annotations

import numpy as np

from collector.model import IntervalKind
from webapp.analysis.causal import fixes
from webapp.analysis.causal.graph import Graph
from webapp.analysis.rules.base import Detection, RuleContext, ms, top_sources
from webapp.analysis.rules.copyfacts import call_ns, copies, waits_for


class BlockingCopy:
    name = "blocking-copy"
    title = "Copies block the host"
    fix = (
        "Pass non_blocking=True to .to()/.cuda()/copy_() (the source must be pinned for this to be "
        "asynchronous), so the host keeps queueing kernels while the copy runs."
    )

    def detect(self, ctx: RuleContext) -> Detection | None:
        rd, g = ctx.rd, ctx.graph
        ops = copies(ctx, IntervalKind.MEMCPY_H2D, big=False)
        ops = ops[rd.mem[g.g_row[ops]] != rd.mem_code("pageable")]  # pageable: pinning is the fix
        held = waits_for(ctx, ops)
        if not len(held):
            return None
        keep = call_ns(ctx)

        def change(graph: Graph) -> Graph:
            return fixes.drop_waits(graph, held, keep)

        waited = int((g.h_end[held] - g.h_start[held]).sum())
        blocked = ops[np.isin(g.g_launch[ops], held) | np.isin(ops, g.w_target[held])]
        rows = g.g_row[blocked] if len(blocked) else g.g_row[ops]
        dur = g.g_dur[blocked] if len(blocked) else g.g_dur[ops]
        detail = (
            f"{len(blocked)} host-to-device copies held the host until they finished: it waited "
            f"{ms(waited / ctx.n_win)} per step. Replayed with non_blocking=True."
        )
        return Detection(
            detail,
            change,
            top_sources(ctx.sources(rows), dur),
            ctx.evidence(rows, dur, (ctx.launch_rows(rows),)),
        )
