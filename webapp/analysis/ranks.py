"""Across ranks: collectives lined up, who arrives last, what the others wait, why, and the step time without it.

A collective is synchronous: ranks enter at different times and leave together, so every rank but the
last waits inside it. Per matched collective (collector.ranks.align.matched_collectives) and rank:
``wait_ns = latest start - start`` (the rank waited that long for the others); ``comm_latency_ns`` = the
shortest duration over ranks (the transfer itself: the last rank to arrive did not wait); start and end skew.

The **straggler** is the rank that arrives last most often. It is reported (rule ``straggler``) when it
is last in at least STRAGGLER_LAST_FRAC of the collectives and the other ranks wait for it at least
STRAGGLER_MIN_FRAC of the median step (median over their steps of ``max(0, start on R - start on r)``
over the step's collectives, overlapping waits counted once). Its cause is the category of the step
breakdown (data loading, host syncs, copies, compute, other host time) where it spends the most time above
the typical (median) other rank. Its cost is replayed where the dependency graph holds the collectives (GPU
ranks): every other rank's collectives run shorter by their wait for R, and the saving is what their steps
lose (R's own steps take the others' saving at the same step). Elsewhere it is the measured wait. The what-if
step time is the median over the other ranks' steps of ``step time - saving``: the step if R ran like the
others.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from collector.model import IntervalKind
from collector.ranks.merge import own_clock_rows
from webapp.analysis import intervals as iv
from webapp.analysis.causal.fixes import shorten
from webapp.analysis.collectives import MAX_TABLE_ROWS, collective_frame, collective_summary
from webapp.analysis.context import RunData, kind_mask
from webapp.analysis.findings import severity
from webapp.analysis.hoststacks import top_frames
from webapp.analysis.rankview import step_grid
from webapp.analysis.records import Evidence, Finding, frame_records
from webapp.analysis.rules.base import Change, RuleContext

STRAGGLER_LAST_FRAC = 0.5
"""A straggler arrives last in at least half the collectives."""
STRAGGLER_MIN_FRAC = 0.20
"""...and costs the others at least a fifth of the median step in waiting (median over their steps). Ranks
sharing two CPU cores were measured 10-15% apart without any plant; below this a slow rank shows in the
per-rank table, not as a finding."""
ALIGN_WARN_FRAC = 0.02
"""A rank whose clock residual (after alignment) exceeds this share of the median step gets a note: the waits
measured across ranks are uncertain by about that much."""
EVIDENCE_LIMIT = 20

BREAKDOWN: dict[str, str] = {
    "data_ns": "time in DataLoader ranges (enumerate(DataLoader)#..., or a range named 'data'), ns",
    "sync_ns": "host waiting in syncs (sync_wait), ns",
    "copy_ns": "host-device copies (union), ns",
    "compute_ns": "kernels (GPU ranks) or host ops outside data loading (CPU ranks), union, ns",
    "comm_ns": "collectives (union over comm lanes), ns",
    "wait_ns": "waiting inside collectives for later ranks (union of own start to latest start), ns",
}
"""Per (rank, step) columns of :func:`rank_steps`, besides rank, step and step_time_ns."""

CAUSES: dict[str, tuple[str, str]] = {
    "data_ns": (
        "data loading",
        "Load data off the step path on rank {r}: DataLoader(num_workers>0, pin_memory=True, "
        "persistent_workers=True, prefetch_factor=2), and look for a slow disk, decode or transform on its host.",
    ),
    "sync_ns": (
        "host syncs",
        "Remove the syncs on rank {r} (.item(), .cpu(), torch.cuda.synchronize(), printing tensors) from the "
        "step, or do them every N steps: its host waits for its GPU before it can issue the collective.",
    ),
    "copy_ns": (
        "host-device copies",
        "Pin the host memory on rank {r} and copy with non_blocking=True, overlapped with compute.",
    ),
    "compute_ns": (
        "extra compute",
        "Rank {r} computes more per step than the others: balance the work (equal batch and sequence sizes, "
        "the same model branches on every rank), and check its device (clocks, thermal throttling, a shared GPU).",
    ),
    "other_ns": (
        "other host work",
        "Rank {r}'s host does other work in each step (Python, logging, checkpointing): move it off the step "
        "path or give every rank the same share.",
    ),
}


HOST_CAUSES = frozenset({"data_ns", "sync_ns", "other_ns"})
"""Causes that are work or waits of the straggler's host, which its sampled stacks can place."""


def _is_data(names: list[str]) -> np.ndarray:
    return np.array([("dataloader" in n.lower()) or n.lower() == "data" for n in names] + [False], dtype=bool)


def rank_steps(rd: RunData, cf: pd.DataFrame, straggler: int = -1) -> pd.DataFrame:
    """One row per step window: ``rank``, ``step``, ``step_time_ns``, the BREAKDOWN columns, ``other_ns``
    (step time not in any of data, sync, copy, compute, comm), and ``wait_for_straggler_ns`` (time this
    rank's collectives in the step waited for rank ``straggler`` to arrive, ns)."""
    w = rd.win
    names = [str(c) for c in rd.trace.intervals["name"].astype("category").cat.categories]
    codes = rd.trace.intervals["name"].astype("category").cat.codes.to_numpy()
    data_rows = _is_data(names)[codes] & kind_mask(rd.kind, IntervalKind.ANNOTATION)
    gpu_trace = bool(len(rd.compute))
    op_rows = kind_mask(rd.kind, IntervalKind.CPU_OP)
    coll_rows = kind_mask(rd.kind, IntervalKind.COLLECTIVE)
    data = iv.union(rd.s[data_rows], rd.e[data_rows])
    comm = iv.union(rd.s[coll_rows], rd.e[coll_rows])
    compute_set = rd.compute if gpu_trace else iv.union(rd.s[op_rows | data_rows], rd.e[op_rows | data_rows])
    a, b = w.starts, w.ends
    out = pd.DataFrame({"rank": rd.win_rank, "step": rd.win_step, "step_time_ns": b - a})
    out["data_ns"] = data.measure_in(a, b)
    out["sync_ns"] = rd.sync.measure_in(a, b)
    out["copy_ns"] = rd.copy.measure_in(a, b)
    out["compute_ns"] = compute_set.measure_in(a, b) - (0 if gpu_trace else out["data_ns"].to_numpy())
    out["comm_ns"] = comm.measure_in(a, b)
    rows = np.concatenate([rd.s[data_rows | rd.sync_mask | rd.copy_mask], rd.s[coll_rows]])
    ends = np.concatenate([rd.e[data_rows | rd.sync_mask | rd.copy_mask], rd.e[coll_rows]])
    busy = iv.union(np.concatenate([rows, compute_set.starts]), np.concatenate([ends, compute_set.ends]))
    out["other_ns"] = np.maximum(out["step_time_ns"].to_numpy() - busy.measure_in(a, b), 0)
    row = cf["row"].to_numpy(np.int64)
    out["wait_ns"] = _waiting(rd, row, cf["wait_ns"].to_numpy(np.int64), a, b)
    late = late_for(cf, straggler) if straggler >= 0 else np.zeros(len(cf))
    waited = _waiting(rd, row, late.round().astype(np.int64), a, b)
    out["wait_for_straggler_ns"] = waited
    return out


def _waiting(rd: RunData, rows: np.ndarray, wait_ns: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per window [a, b): wall time in which the collectives at ``rows`` waited, each from its start for its
    ``wait_ns`` (overlapping collectives, like DDP's buckets, wait at the same time: counted once), ns."""
    s = rd.s[rows]
    return iv.union(s, s + np.maximum(wait_ns, 0)).measure_in(a, b)


def late_for(cf: pd.DataFrame, straggler: int) -> np.ndarray:
    """Per row of ``cf``: how long that rank waited inside the collective for rank ``straggler`` to arrive
    (its start on ``straggler`` - its own start, at least 0; 0 on ``straggler`` itself), ns."""
    start_r = cf[cf["rank"] == straggler].set_index("seq")["start_ns"]
    late = np.maximum(start_r.reindex(cf["seq"]).to_numpy(np.float64) - cf["start_ns"].to_numpy(), 0)
    return np.where(cf["rank"].to_numpy() == straggler, 0, np.nan_to_num(late))


@dataclass(frozen=True)
class RankAnalysis:
    """What :func:`analyze_ranks` finds: the straggler finding (None without one), the ``ranks`` section of
    the analysis, notes for the page, and, where the straggler's cost was replayed, its fix as a graph
    change (``change``) and the saving per step window (``saving``, ns, aligned with rd.win)."""

    finding: Finding | None
    section: dict[str, Any]
    notes: tuple[str, ...]
    change: Change | None = None
    saving: np.ndarray | None = None


def analyze_ranks(rd: RunData, ctx: RuleContext | None = None) -> RankAnalysis:
    """The straggler finding, the ``ranks`` section (collectives, per-rank breakdown, straggler, what-if, clock
    alignment) and notes. With ``ctx`` (a run with GPU work) and the collectives in its dependency graph, the
    straggler's cost is the replayed saving of the other ranks' collectives no longer waiting for it."""
    cf = collective_frame(rd)
    summary = collective_summary(cf)
    n = int(summary["seq"].nunique()) if len(summary) else 0
    last = cf[cf["last"]].groupby("rank").size() if n else pd.Series(dtype=np.int64)
    straggler = int(np.asarray(last.index)[int(np.argmax(last.to_numpy()))]) if len(last) else -1
    share = float(last.max() / n) if n else 0.0
    steps = rank_steps(rd, cf, straggler)
    median_step = float(steps["step_time_ns"].median()) if len(steps) else 0.0
    others = steps[steps["rank"] != straggler]
    wait = float(others["wait_for_straggler_ns"].median()) if len(others) else 0.0
    cols = [*BREAKDOWN, "other_ns"]
    per_rank = steps.groupby("rank")[["step_time_ns", *cols]].mean().reset_index()
    section: dict[str, Any] = {
        "collectives": frame_records(summary.head(MAX_TABLE_ROWS)),
        "collective_count": n,
        "per_rank": frame_records(per_rank),
        "last_counts": {str(k): int(v) for k, v in zip(last.index.tolist(), last.tolist(), strict=True)},
        "alignment": _alignment(rd),
        "grid": step_grid(steps, rd.win_start_ns, rd.win_end_ns),
    }
    found = straggler >= 0 and share >= STRAGGLER_LAST_FRAC and median_step > 0
    found = found and wait >= STRAGGLER_MIN_FRAC * median_step
    notes = _notes(section["alignment"], median_step)
    if not found:
        if straggler >= 0 and share >= STRAGGLER_LAST_FRAC and wait > 0 and median_step > 0:
            notes = (
                *notes,
                f"Rank {straggler} arrives last in {share:.0%} of the collectives, but the other ranks wait only "
                f"{wait / 1e6:.2f} ms per step for it ({wait / median_step:.0%} of the median step, under the "
                f"{STRAGGLER_MIN_FRAC:.0%} a straggler finding needs: ranks differ that much without one).",
            )
        return RankAnalysis(None, section, notes)
    # per rank, its typical step (medians): a rank's short last window (no next step's loading) is no cause
    cause_col, excess = _cause(steps.groupby("rank")[cols].median().reset_index(), straggler, cols)
    replayed = _replayed(rd, ctx, cf, straggler) if ctx is not None else None
    if replayed is None:  # the measured wait
        cost, total = wait, float(others["wait_for_straggler_ns"].sum())
        fixed = float((others["step_time_ns"] - others["wait_for_straggler_ns"]).median())
    else:
        covered = ctx.covered if ctx is not None else np.ones(len(rd.win), dtype=bool)  # ctx is set: typing
        saving = replayed[1]
        total = float(saving[covered].sum())
        cost = total / max(int(covered.sum()), 1)
        theirs = covered & (rd.win_rank != straggler)
        measured = (rd.win.ends - rd.win.starts).astype(np.float64)
        fixed = float(np.median((measured - saving)[theirs])) if theirs.any() else median_step
    section["straggler"] = {
        "rank": straggler,
        "last_frac": share,
        "wait_per_step_ns": wait,
        "saving_per_step_ns": cost,
        "replayed": replayed is not None,
        "cause": CAUSES[cause_col][0],
        "excess_ns": {k: float(v) for k, v in excess.items()},
    }
    section["what_if"] = {"step_time_now_ns": median_step, "step_time_without_straggler_ns": fixed}
    # a cause on its host: its sampled frames say where (the extra work's own line, for "other host work")
    frames = top_frames(rd, rank=straggler) if cause_col in HOST_CAUSES else ""
    facts = _Facts(
        straggler, share, wait, cost, median_step, cause_col, float(excess[cause_col]), replayed is not None, frames
    )
    finding = _finding(facts, cf, total)
    return RankAnalysis(finding, section, notes, *(replayed or (None, None)))


def _cause(per_rank: pd.DataFrame, straggler: int, cols: list[str]) -> tuple[str, pd.Series]:
    """The straggler's cause (a CAUSES key) and its excess per breakdown column over the typical rank, ns."""
    typical = per_rank[per_rank["rank"] != straggler][cols].median()
    excess = per_rank[per_rank["rank"] == straggler][cols].iloc[0] - typical
    own = excess[list(CAUSES)]  # what the straggler does itself (not its time in collectives)
    cause_col = str(own.idxmax()) if own.max() > 0 else "other_ns"
    if own["sync_ns"] >= 0.5 * max(float(own.clip(lower=0).max()), 1.0):
        cause_col = "sync_ns"  # a sync puts the device's work on the host's path: the sync is what to fix
    return cause_col, excess


def _replayed(rd: RunData, ctx: RuleContext, cf: pd.DataFrame, straggler: int) -> tuple[Change, np.ndarray] | None:
    """The straggler's fix as a graph change (every other rank's collectives shortened by their wait for it)
    and its replayed saving per step window (the straggler's own windows come down to the other ranks' median
    fixed step at the same step: ranks step together). None where the graph holds under half of those collectives (they
    ran on host threads, which the graph does not replay)."""
    g = ctx.graph
    late = late_for(cf, straggler)
    waiting = (cf["rank"].to_numpy() != straggler) & (late > 0)
    if not waiting.any():
        return None
    op_of_row = np.full(len(rd.kind), -1, dtype=np.int64)
    op_of_row[g.g_row] = np.arange(g.n_gpu)
    ops = op_of_row[cf["row"].to_numpy(np.int64)[waiting]]
    if (ops >= 0).mean() < 0.5:
        return None
    change = partial(shorten, ops=ops[ops >= 0], by_ns=late[waiting][ops >= 0].round().astype(np.int64))
    saving = np.maximum(ctx.saving(change), 0).astype(np.float64)
    # the straggler's own steps keep pace with the others' fixed steps: a short window of its (its last) saves
    # only what takes it down to theirs
    base = ctx.base_steps.astype(np.float64)
    return change, np.maximum(base - lockstep(rd, base - saving, straggler), 0)


def lockstep(rd: RunData, per_win: np.ndarray, rank: int) -> np.ndarray:
    """``per_win`` (aligned with rd.win) with rank ``rank``'s windows replaced by the median over the other
    ranks' windows of the same step (kept where no other rank has that step)."""
    mine = rd.win_rank == rank
    if not mine.any() or mine.all():
        return per_win
    others = pd.Series(per_win[~mine]).groupby(rd.win_step[~mine]).median()
    out = np.asarray(per_win, dtype=np.float64).copy()
    theirs = others.reindex(rd.win_step[mine]).to_numpy(np.float64)
    out[mine] = np.where(np.isnan(theirs), out[mine], theirs)
    return out


@dataclass(frozen=True)
class _Facts:
    rank: int
    share: float
    wait: float
    cost: float
    median_step: float
    cause: str
    extra: float
    replayed: bool
    frames: str = ""
    """Where the straggler's host time went (webapp.analysis.hoststacks.top_frames; '' without samples)."""


def _finding(f: _Facts, cf: pd.DataFrame, total: float) -> Finding:
    label, fix = CAUSES[f.cause]
    r = f.rank
    waits = cf[(cf["rank"] != r) & (cf["wait_ns"] > 0)].nlargest(EVIDENCE_LIMIT, "wait_ns")
    evidence = tuple(
        Evidence(int(rk), int(s), int(e))
        for rk, s, e in zip(waits["rank"], waits["start_ns"], waits["end_ns"], strict=True)
    )
    detail = (
        f"Rank {r} arrives last in {f.share:.0%} of the collectives; every other rank waits for it inside "
        f"them. Cause on rank {r}: {label} ({f.extra / 1e6:.2f} ms more per step than the typical rank)."
    )
    if f.frames:
        detail += f" Where rank {r}'s host time went: {f.frames}."
    if not f.replayed:
        detail += (
            " The cost is the measured wait: the collectives ran on host threads, which the dependency graph "
            "does not replay."
        )
    elif f.cost < 0.5 * f.wait:
        detail += (
            f" Replayed without those waits, a step takes only {f.cost / 1e6:.2f} ms less: the other ranks' "
            "collectives wait beside longer work of their own (see the critical path), which holds their steps."
        )
    else:
        detail += f" Replayed without those waits, a step takes {f.cost / 1e6:.2f} ms less."
    return Finding(
        rule="straggler",
        title=f"Rank {r} is the straggler: the other ranks wait {f.wait / 1e6:.2f} ms per step for it",
        severity=severity(f.cost / f.median_step),
        cost_per_step_ns=int(round(f.cost)),
        fix=fix.format(r=r),
        detail=detail,
        evidence=evidence,
        cost_total_ns=int(round(total)),
    )


def _alignment(rd: RunData) -> list[dict[str, Any]]:
    info = (rd.trace.meta.notes or {}).get("clock_alignment") or {}
    return [dict(r) for r in info.get("ranks") or [] if isinstance(r, dict)]


def _notes(alignment: list[dict[str, Any]], median_step_ns: float) -> tuple[str, ...]:
    if not alignment:
        return ()
    parts = ", ".join(
        f"rank {a.get('rank')} {int(a.get('offset_ns') or 0) / 1e3:+.0f} us"
        f" (residual {int(a.get('residual_ns') or 0) / 1e3:.0f} us)"
        for a in alignment
    )
    notes = [f"Rank clocks aligned on the ends of their collectives: {parts}."]
    own_clock = own_clock_rows(alignment)
    alone = [str(a.get("rank")) for a in own_clock if not int(a.get("anchors") or 0)]
    if alone:
        ref = min(int(a.get("rank") or 0) for a in alignment)
        notes.append(
            f"Rank {', '.join(alone)} shared no collective with rank {ref}: its times stay on its own host's"
            " clock, so its waits across ranks are not comparable."
        )
    for a in own_clock:
        residual = int(a.get("residual_ns") or 0)
        if median_step_ns > 0 and residual > ALIGN_WARN_FRAC * median_step_ns:
            notes.append(
                f"Rank {a.get('rank')}'s clock residual ({residual / 1e6:.2f} ms) is {residual / median_step_ns:.0%}"
                " of the median step: its waits across ranks, and a straggler's figures, are uncertain by about"
                " that much."
            )
    return tuple(notes)
