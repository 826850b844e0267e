"""sync-in-loop: host syncs seen in most steps (or every few), fixed by reading values every N steps."""

from __future__ import annotations

import numpy as np
import pandas as pd

from webapp.analysis.causal import fixes
from webapp.analysis.causal.graph import Graph
from webapp.analysis.context import COPY_SYNC_CAUSES
from webapp.analysis.rules.base import Detection, RuleContext, ms
from webapp.analysis.texts import sync_fix

IN_LOOP_STEP_FRAC = 0.5
"""A sync seen in at least half the steps is part of the loop, not a one-off (checkpoint, eval)."""
RECURRING_MIN_STEPS = 3
"""A sync in fewer steps but in at least this many (logging every N steps) is named beside the per-step
ones: the same fix applies, and one-offs stay out."""
RECURRING_MIN_FRAC = 0.005
"""A less frequent sync is named only where reading less often there saves this share of a step (0.5%, the
least a finding is shown for)."""
READ_EVERY = 10
"""The fix keeps one read every READ_EVERY steps: the value is still read, just not every step."""


def sync_groups(ctx: RuleContext) -> pd.DataFrame:
    """Waits of the issuing thread inside steps that are not a copy's own, one row per wait: ``node`` (graph
    index), ``cause``, ``source``, ``win`` (step window)."""
    g = ctx.graph
    waits = np.flatnonzero(g.h_sync & (ctx.host_win() >= 0))
    frame = pd.DataFrame(
        {
            "node": waits,
            "cause": ctx.column("cause", g.h_row[waits]),
            "source": ctx.sources(g.h_row[waits]),
            "win": ctx.host_win()[waits],
        }
    )
    return frame[~frame["cause"].isin(list(COPY_SYNC_CAUSES))]


def dropped(ctx: RuleContext, nodes: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """The waits the fix removes (all of them in a run of no more than READ_EVERY steps): of each source's
    (``groups``: a label per node; None: one source), on each rank, those of its first step are kept, then
    those of the next step it waits in at least READ_EVERY steps later, and so on. A sync already read every
    READ_EVERY steps or less often loses nothing."""
    if len(ctx.rd.win) <= READ_EVERY:
        return nodes
    win = ctx.host_win()[nodes]
    step, rank = ctx.rd.win_step[win], ctx.rd.win_rank[win]
    labels = np.zeros(len(nodes), dtype=np.int64) if groups is None else pd.factorize(groups)[0]
    key, _ = pd.factorize(pd.MultiIndex.from_arrays([labels, rank]))
    keep = np.zeros(len(nodes), dtype=bool)
    for k in range(int(key.max()) + 1 if len(key) else 0):
        mine = key == k
        read, last = [], None
        for s in np.unique(step[mine]).tolist():
            if last is None or s - last >= READ_EVERY:
                read.append(s)
                last = s
        keep[mine] = np.isin(step[mine], read)
    return nodes[~keep]


def source_saving(ctx: RuleContext, frame: pd.DataFrame, cause: str, source: str) -> np.ndarray:
    """Per step window, the replayed saving (ns) of reading less often at one source of syncs (``frame``:
    :func:`sync_groups`); replayed once per source and run (the rule and the sync table both ask)."""

    def replayed() -> np.ndarray:
        nodes = dropped(ctx, frame.loc[(frame["cause"] == cause) & (frame["source"] == source), "node"].to_numpy())
        return ctx.saving(lambda graph: fixes.drop_waits(graph, nodes))

    return ctx.cached(f"sync-source:{cause}|{source}", replayed)


def _pays(ctx: RuleContext, frame: pd.DataFrame, key: tuple[str, str]) -> bool:
    """Whether reading less often at one source of syncs saves RECURRING_MIN_FRAC of a step or more (a sync
    that waits for a copy the host reads later, as advised, saves nothing)."""
    saved = float(source_saving(ctx, frame, *key).sum()) / ctx.n_win
    return saved >= RECURRING_MIN_FRAC * ctx.step_ref


class SyncInLoop:
    name = "sync-in-loop"
    title = "Host syncs inside the loop"
    fix = sync_fix(())

    def detect(self, ctx: RuleContext) -> Detection | None:
        frame = sync_groups(ctx)
        if frame.empty:
            return None
        g = ctx.graph
        n_win = ctx.n_win
        per = frame.groupby(["cause", "source"]).agg(steps=("win", "nunique"), count=("win", "size"))
        loop = per[per["steps"] >= IN_LOOP_STEP_FRAC * n_win]
        recurring = per[(per["steps"] < IN_LOOP_STEP_FRAC * n_win) & (per["steps"] >= RECURRING_MIN_STEPS)]
        if loop.empty:
            return None
        recurring = recurring.loc[np.array([_pays(ctx, frame, key) for key in recurring.index], dtype=bool)]
        named = pd.concat([loop.sort_values("count", ascending=False), recurring.sort_values("steps", ascending=False)])
        keep = frame.set_index(["cause", "source"]).index.isin(named.index)
        nodes = frame["node"].to_numpy()[keep]
        drop = dropped(ctx, nodes, (frame["cause"] + "|" + frame["source"]).to_numpy()[keep])

        def change(graph: Graph) -> Graph:
            return fixes.drop_waits(graph, drop)

        waited = int((g.h_end[nodes] - g.h_start[nodes]).sum())
        parts = [
            f"{c or 'sync'} at {s or 'unknown source'} ({'every step' if k >= n_win else f'in {k} of {n_win} steps'})"
            for (c, s), k in zip(loop.index, loop["steps"], strict=True)
        ][:5]
        detail = f"Host syncs in the loop: {'; '.join(parts)}."
        if len(recurring):
            more = [
                f"{c or 'sync'} at {s or 'unknown source'} (in {k} of {n_win} steps)"
                for (c, s), k in zip(recurring.index, recurring["steps"], strict=True)
            ][:5]
            detail += f" Also in the loop, less often: {'; '.join(more)}."
        detail += (
            f" The host waited {ms(waited / n_win)} per step in them. Replayed with the value read every "
            f"{READ_EVERY} steps" + (" (not within this trace's steps)." if n_win <= READ_EVERY else ".")
        )
        rows = g.h_row[nodes]
        dur = g.h_end[nodes] - g.h_start[nodes]
        return Detection(
            detail,
            change,
            tuple(dict.fromkeys(s for (_, s) in named.index if s))[:5],
            ctx.evidence(rows, dur),
            sync_fix(tuple(dict.fromkeys(c for (c, _) in named.index))),
        )
