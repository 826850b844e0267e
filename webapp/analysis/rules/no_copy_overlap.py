"""no-copy-overlap: uploads that run while no kernel runs, fixed by prefetching on a side stream."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from collector.model import IntervalKind
from webapp.analysis.causal import fixes
from webapp.analysis.causal.graph import Graph
from webapp.analysis.rules.base import Detection, RuleContext, ms, top_sources
from webapp.analysis.rules.copyfacts import call_ns, copies, pinned_rate, waits_for

EXPOSED_FRAC = 0.1
"""A copy counts as not overlapped when more than a tenth of it ran while no kernel ran."""


class NoCopyOverlap:
    name = "no-copy-overlap"
    title = "Copies do not overlap compute"
    fix = (
        "Prefetch the next batch on a side stream: copy_stream = torch.cuda.Stream(); with "
        "torch.cuda.stream(copy_stream): nxt = batch.to(device, non_blocking=True); before using it, "
        "torch.cuda.current_stream().wait_stream(copy_stream) and nxt.record_stream(torch.cuda.current_stream())."
    )
    PINNED_NEEDED = " Needs pinned host memory (DataLoader(pin_memory=True), or tensor.pin_memory())."

    def detect(self, ctx: RuleContext) -> Detection | None:
        rd, g = ctx.rd, ctx.graph
        ops = copies(ctx, IntervalKind.MEMCPY_H2D)
        if not len(ops):
            return None
        rows = g.g_row[ops]
        exposed = g.g_dur[ops] - rd.compute.measure_in(rd.s[rows], rd.e[rows])
        bare = exposed > EXPOSED_FRAC * g.g_dur[ops]
        ops, rows, exposed = ops[bare], rows[bare], exposed[bare]
        if not len(ops):
            return None
        pageable = ops[rd.mem[rows] == rd.mem_code("pageable")]
        gbps, _ = pinned_rate(ctx, ops)
        held = waits_for(ctx, ops)
        keep = call_ns(ctx)
        key, _ = pd.factorize(pd.Series(ctx.sources(rows)) + "|" + pd.Series(g.g_bytes[ops]).astype(str))

        def change(graph: Graph) -> Graph:
            graph = fixes.pin_copies(graph, pageable, gbps) if len(pageable) else graph
            return fixes.prefetch(fixes.drop_waits(graph, held, keep), ops, np.asarray(key, dtype=np.int64))

        overlap = ctx.metrics.get("copy_compute_overlap_frac", math.nan)
        detail = (
            f"{len(ops)} host-to-device copies ran while no kernel ran, {ms(exposed.sum() / ctx.n_win)} per step on "
            "average; "
            f"overlap with compute was {overlap * 100:.0f}% of copy time. Replayed with each copy issued a step "
            "ahead on its own stream" + (" from pinned memory" if len(pageable) else "") + "."
        )
        return Detection(
            detail,
            change,
            top_sources(ctx.sources(rows), exposed),
            ctx.evidence(rows, exposed, (ctx.launch_rows(rows),)),
            fix=self.fix + (self.PINNED_NEEDED if len(pageable) else ""),  # pinned already: nothing to add
        )
