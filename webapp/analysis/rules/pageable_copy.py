"""pageable-copy: copies through pageable host memory, fixed by pinning (and non_blocking for uploads)."""

from __future__ import annotations

from collector.model import IntervalKind
from webapp.analysis.causal import fixes
from webapp.analysis.causal.graph import Graph
from webapp.analysis.rules.base import Detection, RuleContext, top_sources
from webapp.analysis.rules.copyfacts import FALLBACK_PINNED_SPEEDUP, call_ns, copies, pinned_rate, waits_for


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
        what = " and ".join(
            x
            for x in (
                f"{len(uploads)} host-to-device" if len(uploads) else "",
                f"{len(ops) - len(uploads)} device-to-host" if len(ops) > len(uploads) else "",
            )
            if x
        )
        against = (
            f"{gbps:.1f} GB/s pinned (bandwidth probe)"
            if probed
            else f"an assumed {FALLBACK_PINNED_SPEEDUP:.0f}x faster pinned copy"
        )
        detail = (
            f"{what} copies of {g.g_bytes[ops].mean() / 2**20:.1f} MiB on average through pageable memory ran at "
            f"{achieved:.1f} GB/s. Replayed from pinned memory at {against}, with uploads non-blocking and "
            "downloads read as soon as the GPU's copy ends."
        )
        dur = g.g_dur[ops]
        return Detection(
            detail,
            change,
            top_sources(ctx.sources(rows), dur),
            ctx.evidence(rows, dur, (ctx.launch_rows(rows),)),
        )
