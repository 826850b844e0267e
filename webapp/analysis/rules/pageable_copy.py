"""pageable-copy: copies through pageable host memory, fixed by pinning (and non_blocking for uploads)."""

from __future__ import annotations

import math

import numpy as np

from collector.model import IntervalKind
from webapp.analysis.causal import fixes
from webapp.analysis.causal.graph import Graph
from webapp.analysis.rules.base import MIN_COPY_BYTES, Detection, RuleContext, top_sources
from webapp.analysis.rules.copyfacts import FALLBACK_PINNED_SPEEDUP, call_ns, copies, pinned_rate, waits_for
from webapp.analysis.units import size_text


def _count(ctx: RuleContext, ops: np.ndarray) -> str:
    """'100 host-to-device copies', '3 host-to-device and 1 device-to-host copy'."""
    rd = ctx.rd
    up = int(np.count_nonzero(rd.kind[ctx.graph.g_row[ops]] == rd.code(IntervalKind.MEMCPY_H2D)))
    parts = [f"{n} {way}" for n, way in ((up, "host-to-device"), (len(ops) - up, "device-to-host")) if n]
    return " and ".join(parts) + (" copy" if len(ops) == 1 else " copies")


class PageableCopy:
    name = "pageable-copy"
    title = "Copies through pageable host memory"
    fix = (
        "Copy from pinned memory: DataLoader(..., pin_memory=True), or tensor.pin_memory() once for a reused "
        "buffer, then .to(device, non_blocking=True). For large device-to-host reads, copy into a preallocated "
        "pinned buffer: buf = torch.empty(shape, pin_memory=True); buf.copy_(x, non_blocking=True)."
    )

    def detect(self, ctx: RuleContext) -> Detection | None:
        ops = copies(ctx, memory="pageable")
        if not len(ops):
            return None
        g, rd = ctx.graph, ctx.rd
        gbps, probed = pinned_rate(ctx, ops)
        is_upload = rd.kind[g.g_row[ops]] == rd.code(IntervalKind.MEMCPY_H2D)
        uploads = ops[is_upload]
        held = waits_for(ctx, uploads)
        reads = waits_for(ctx, ops[~is_upload])  # downloads: still read, without the host-side staging copy
        keep = call_ns(ctx)

        def change(graph: Graph) -> Graph:
            graph = fixes.quick_waits(fixes.pin_copies(graph, ops, gbps), reads, keep)
            return fixes.drop_waits(graph, held, keep)

        rows = g.g_row[ops]
        achieved = g.g_bytes[ops].sum() / max(int(g.g_dur[ops].sum()), 1)
        small = np.setdiff1d(copies(ctx, memory="pageable", big=False), ops)

        def size(sel: np.ndarray) -> str:
            return size_text(g.g_bytes[sel].mean()) + ("" if len(sel) == 1 else " on average")

        probe = ctx.metrics.get("h2d_pinned_probe_gbps", math.nan)
        source = "the bandwidth probe" if probe == probe and probe > 0 else "this run's own pinned copies"
        replay = (
            f"from pinned memory at {gbps:.1f} GB/s ({source})"
            if probed
            else f"from pinned memory, assumed {FALLBACK_PINNED_SPEEDUP:.0f}x faster"
        )
        tail = "uploads non-blocking and downloads read as soon as the GPU's copy ends."
        if len(small):  # every pageable copy counted; the replay pins those of MIN_COPY_BYTES or more
            detail = (
                f"{_count(ctx, np.union1d(ops, small))} went through pageable memory: {len(ops)} of "
                f"{size_text(MIN_COPY_BYTES)} or more ({size(ops)}) at {achieved:.1f} GB/s, and {len(small)} smaller "
                f"({size(small)}), whose time is latency rather than bandwidth. Replayed with the larger "
                f"{'one' if len(ops) == 1 else 'ones'} copied {replay}, {tail}"
            )
        else:
            detail = (
                f"{_count(ctx, ops)} of {size(ops)} went through pageable memory at {achieved:.1f} GB/s. "
                f"Replayed {replay}, with {tail}"
            )
        if probed and gbps <= achieved:  # pin_copies never slows a copy: the saving is the host's waits alone
            detail += (
                f" Pinned copies run no faster here ({gbps:.1f} against {achieved:.1f} GB/s): what the replay saves is "
                "the host no longer waiting for them."
            )
        dur = g.g_dur[ops]
        fix = self.fix
        if len(uploads) and not len(held):  # the uploads did not hold the host: non_blocking is there already
            fix += (
                " The uploads here already pass non_blocking=True: from pageable memory the driver copies through a "
                "staging buffer of its own, at the pageable rate; pinned memory is what they lack."
            )
        return Detection(
            detail,
            change,
            top_sources(ctx.sources(rows), dur),
            ctx.evidence(rows, dur, (ctx.launch_rows(rows),)),
            fix=fix,
        )
