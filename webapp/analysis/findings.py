"""Findings: each rule measures what its problem costs per step and says how to fix it in PyTorch.

:func:`find_all` returns the findings, the minor ones and, per rule, the cost in every step window (ns),
which the what-if estimate and the per-step table use. Costs never overlap between rules: idle gaps are
each blamed on one cause (webapp.analysis.gaps), copy time on the pageable or the overlap rule. Only work
inside step windows is judged: the set-up and tail (webapp.analysis.phases) are one-time work.

Severity, from a finding's mean cost per step against the median step: critical >= CRITICAL_FRAC (20%),
warning >= WARNING_FRAC (5%), info below; a cost that hits fewer than IN_LOOP_STEP_FRAC of the steps stays
info. Below LIST_FRAC (0.5%) of the step, or under MIN_LISTED_NS, a finding is minor: kept in the JSON,
not listed. Findings are ranked by cost per step, then total cost, costliest first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from collector.model import IntervalKind
from webapp.analysis import gaps as gp
from webapp.analysis.context import COPY_SYNC_CAUSES, RunData
from webapp.analysis.records import Evidence, Finding
from webapp.analysis.texts import FIXES, sync_fix

INFO_FRAC = 0.01
"""A step counts as hit by a finding when the finding costs it at least 1% of the median step."""
LIST_FRAC = 0.005
"""Below 0.5% of the median step a cost is within run-to-run noise: the finding is minor, not listed."""
MIN_LISTED_NS = 1_000
"""A cost under 1 us per step is never listed (it would read as 0.000 ms)."""
WARNING_FRAC = 0.05
"""5% of step time is worth a code change; a clean run (the overlap demo) stays below it."""
CRITICAL_FRAC = 0.20
"""A fifth of every step lost: the first thing to fix."""
MIN_COPY_BYTES = 1 << 20
"""Copies under 1 MiB (scalars read by .item(), small tensors) are latency, not bandwidth problems."""
IN_LOOP_STEP_FRAC = 0.5
"""A sync seen in at least half the steps is part of the loop, not a one-off (checkpoint, eval); a cost that
hits fewer steps than that is reported as info whatever its size."""
RECURRING_MIN_STEPS = 3
"""A sync that is not in most steps but comes back in at least this many (logging every N steps) is named
beside the per-step ones: the same fix applies, and one-offs (a checkpoint, an eval) stay out."""
FALLBACK_PINNED_SPEEDUP = 2.0
"""Without a bandwidth probe or pinned copies to measure, assume pinned copies run only 2x faster than
pageable ones (10x measured on an H200): a deliberately modest estimate."""
EVIDENCE_LIMIT = 20
"""Evidence items kept per finding (the largest), enough to zoom the timeline to."""

AddFinding = Callable[..., None]

RULES = ("pageable-copy", "blocking-copy", "no-copy-overlap", "sync-in-loop", "launch-bound", "idle-gaps")


def severity(frac: float) -> str:
    """Severity for a cost that is ``frac`` of the step time."""
    if frac >= CRITICAL_FRAC:
        return "critical"
    if frac >= WARNING_FRAC:
        return "warning"
    return "info"


def _pinned_gbps(rd: RunData, metrics: dict[str, float]) -> float:
    for key in ("h2d_pinned_probe_gbps", "h2d_pinned_achieved_gbps"):
        value = metrics.get(key, math.nan)
        if value == value and value > 0:
            return float(value)
    return math.nan


def _strings(col: pd.Series, rows: np.ndarray) -> np.ndarray:
    """Column values at ``rows`` as an object array of str (never a fixed-width numpy string)."""
    return col.iloc[rows].astype(str).to_numpy(dtype=object)


def _sources(rd: RunData, rows: np.ndarray) -> np.ndarray:
    """User source of each row: its own, else the source of the CPU interval that launched it."""
    df = rd.trace.intervals
    own = _strings(df["source"], rows)
    lid = np.asarray(df["launch_id"], dtype=np.int64)[rows]
    lrow = rd.rows_of_ids(lid)
    missing = (own == "") & (lrow >= 0)
    if missing.any():
        own[missing] = _strings(df["source"], lrow[missing])
    return own


def _launch_rows(rd: RunData, rows: np.ndarray) -> np.ndarray:
    """Row of the CPU interval that launched each row (-1 where unknown)."""
    return rd.rows_of_ids(np.asarray(rd.trace.intervals["launch_id"], dtype=np.int64)[rows])


def _top_sources(sources: np.ndarray, weights: np.ndarray, limit: int = 5) -> tuple[str, ...]:
    if not len(sources):
        return ()
    s = pd.Series(weights, index=sources).groupby(level=0).sum().sort_values(ascending=False)
    return tuple(str(k) for k in s.index if k)[:limit]


def _evidence(
    rd: RunData,
    rows: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    weight: np.ndarray,
    extra: Sequence[np.ndarray] = (),
) -> tuple[Evidence, ...]:
    """The EVIDENCE_LIMIT heaviest items; ``start``/``end`` on the axis, ``rows`` (and extra rows) as ids."""
    if not len(weight):
        return ()
    top = np.argsort(-weight, kind="stable")[:EVIDENCE_LIMIT]
    ids = rd.ids
    rank = (start[top] // rd.tb.stride).astype(np.int64)
    s = rd.tb.from_axis(rank, start[top])
    e = rd.tb.from_axis(rank, end[top])
    out = []
    for k, i in enumerate(top):
        rid = [r for r in (rows[i], *(x[i] for x in extra)) if r >= 0]
        out.append(Evidence(int(rank[k]), int(s[k]), int(e[k]), tuple(int(ids[r]) for r in rid)))
    return tuple(out)


def _per_window(rd: RunData, t_axis: np.ndarray, cost: np.ndarray) -> np.ndarray:
    w = rd.win_of(t_axis)
    ok = w >= 0
    return np.bincount(w[ok], weights=cost[ok].astype(np.float64), minlength=len(rd.win)).astype(np.int64)


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


def find_all(
    rd: RunData, per_step: pd.DataFrame, metrics: dict[str, float], gaps: gp.Gaps, blocked: np.ndarray
) -> tuple[tuple[Finding, ...], tuple[Finding, ...], dict[str, np.ndarray]]:
    """Listed findings and minor ones, each costliest first, and each rule's cost per step window (ns,
    aligned with rd.win)."""
    n_win = max(len(rd.win), 1)
    step_ref = float(np.median(rd.win.ends - rd.win.starts)) if len(rd.win) else 0.0
    df = rd.trace.intervals
    nbytes = np.asarray(df["bytes"], dtype=np.int64)
    dur = rd.e - rd.s
    costs: dict[str, np.ndarray] = {r: np.zeros(len(rd.win), dtype=np.int64) for r in RULES}
    found: list[Finding] = []
    minor: list[Finding] = []

    def add(
        rule: str,
        detail: str,
        sources: tuple[str, ...],
        evidence: tuple[Evidence, ...],
        fix: str | None = None,
    ) -> None:
        total = float(costs[rule].sum())
        per_step = total / n_win  # the per-step columns and the what-if use the same costs
        frac = per_step / step_ref if step_ref > 0 else 0.0
        sev = severity(frac)
        hit = int((costs[rule] >= INFO_FRAC * step_ref).sum()) if step_ref > 0 else 0
        if sev != "info" and hit < IN_LOOP_STEP_FRAC * n_win:
            sev = "info"  # concentrated in a few steps: a one-off (checkpoint, eval, a pause), not the loop
            detail += f" Only {hit} of {n_win} steps are affected."
        title, default_fix = FIXES[rule]
        finding = Finding(
            rule, title, sev, int(round(per_step)), fix or default_fix, detail, sources, evidence, int(round(total))
        )
        (found if frac >= LIST_FRAC and per_step >= MIN_LISTED_NS else minor).append(finding)

    # copies: pageable-copy and no-copy-overlap share each copy's exposed time
    big = np.flatnonzero(rd.copy_mask & (nbytes >= MIN_COPY_BYTES) & (rd.win_row >= 0))
    exposed = dur[big] - rd.compute.measure_in(rd.s[big], rd.e[big])
    pageable = rd.mem[big] == rd.mem_code("pageable")
    pinned_gbps = _pinned_gbps(rd, metrics)
    est = dur[big] / FALLBACK_PINNED_SPEEDUP if math.isnan(pinned_gbps) else nbytes[big] / pinned_gbps
    save_pinned = np.where(pageable, np.clip(dur[big] - est, 0, exposed), 0).astype(np.int64)
    if pageable.any():
        pr = big[pageable]
        costs["pageable-copy"] = _per_window(rd, rd.s[big], save_pinned)
        achieved = nbytes[pr].sum() / max(dur[pr].sum(), 1)
        bw = (
            f"{pinned_gbps:.1f} GB/s pinned (bandwidth probe)"
            if not math.isnan(pinned_gbps)
            else f"an assumed {FALLBACK_PINNED_SPEEDUP:.0f}x faster pinned copy"
        )
        n_h2d = int((rd.kind[pr] == rd.code(IntervalKind.MEMCPY_H2D)).sum())
        what = " and ".join(
            x
            for x in (
                f"{n_h2d} host-to-device" if n_h2d else "",
                f"{len(pr) - n_h2d} device-to-host" if len(pr) > n_h2d else "",
            )
            if x
        )
        detail = (
            f"{what} copies of {nbytes[pr].sum() / len(pr) / 2**20:.1f} MiB on average through pageable "
            f"memory ran at {achieved:.1f} GB/s; against {bw} they would save "
            f"{_ms(save_pinned.sum() / n_win)} per step."
        )
        add(
            "pageable-copy",
            detail,
            _top_sources(_sources(rd, pr), dur[pr]),
            _evidence(rd, pr, rd.s[pr], rd.e[pr], dur[pr], (_launch_rows(rd, pr),)),
        )
    h2d = rd.kind[big] == rd.code(IntervalKind.MEMCPY_H2D)
    left = np.where(h2d, exposed - save_pinned, 0).astype(np.int64)
    if (left > 0).any():
        costs["no-copy-overlap"] = _per_window(rd, rd.s[big], left)
        rows = big[left > 0]
        detail = (
            f"{len(rows)} host-to-device copies ran while no kernel ran, "
            f"{_ms(left.sum() / n_win)} per step (after pinning); overlap with compute was "
            f"{metrics.get('copy_compute_overlap_frac', math.nan) * 100:.0f}% of copy time."
        )
        add(
            "no-copy-overlap",
            detail,
            _top_sources(_sources(rd, rows), left[left > 0]),
            _evidence(rd, rows, rd.s[rows], rd.e[rows], left[left > 0], (_launch_rows(rd, rows),)),
        )

    # gap-based rules
    length = gaps.length
    blk = big[np.isin(big, blocked)]
    gmask = gaps.cause == gp.BLOCKING
    costs["blocking-copy"] = gaps.per_window(len(rd.win), gmask)
    if len(blk):
        detail = (
            f"{len(blk)} host-to-device copies held the host until they finished; the GPU then waited "
            f"{_ms(length[gmask].sum() / n_win)} per step for the next launch."
        )
        add(
            "blocking-copy",
            detail,
            _top_sources(_sources(rd, blk), dur[blk]),
            _evidence(rd, blk, rd.s[blk], rd.e[blk], dur[blk], (_launch_rows(rd, blk),)),
        )

    _sync_rule(rd, gaps, costs, add, n_win)

    gmask = gaps.cause == gp.STARVED
    costs["launch-bound"] = gaps.per_window(len(rd.win), gmask)
    if gmask.any():
        in_steps = rd.win_row >= 0
        launches = int((in_steps & (rd.kind == rd.code(IntervalKind.LAUNCH))).sum())
        kern = in_steps & (rd.kind == rd.code(IntervalKind.KERNEL))
        facts = [f"{launches / n_win:.0f} launches per step"] if launches else []
        if kern.any():
            facts.append(f"median kernel {float(np.median(dur[kern])) / 1e3:.1f} us")
        facts.append(f"host issuing {_ms(float(per_step['host_issue_ns'].mean()))} per step")
        detail = (
            f"The GPU idled {_ms(length[gmask].sum() / n_win)} per step waiting for the host to launch "
            f"work ({', '.join(facts)})."
        )
        rows = gaps.next_row[gmask]
        add("launch-bound", detail, (), _evidence(rd, rows, gaps.s[gmask], gaps.e[gmask], length[gmask]))

    gmask = ((gaps.cause == gp.HOST) | (gaps.cause == gp.QUEUED)) & (length >= gp.LONG_GAP_NS)
    costs["idle-gaps"] = gaps.per_window(len(rd.win), gmask)
    if gmask.any():
        a, b = gaps.s[gmask], gaps.e[gmask]
        issuing = (rd.host.measure_in(a, b) - rd.sync.measure_in(a, b)).sum()
        syncing = rd.sync.measure_in(a, b).sum()
        tot = max(int((b - a).sum()), 1)
        detail = (
            f"{int(gmask.sum())} GPU gaps of {gp.LONG_GAP_NS / 1e3:.0f} us or more, "
            f"{_ms(tot / n_win)} per step; meanwhile the host was issuing work {issuing / tot:.0%}, "
            f"waiting in syncs {syncing / tot:.0%} and otherwise idle or in unrecorded code "
            f"{max(1 - (issuing + syncing) / tot, 0):.0%} of that time."
        )
        add("idle-gaps", detail, (), _evidence(rd, gaps.next_row[gmask], a, b, b - a))
    found.sort(key=lambda f: (-f.cost_per_step_ns, -f.cost_total_ns))
    minor.sort(key=lambda f: (-f.cost_per_step_ns, -f.cost_total_ns))
    return tuple(found), tuple(minor), costs


def _sync_rule(rd: RunData, gaps: gp.Gaps, costs: dict[str, np.ndarray], add: AddFinding, n_win: int) -> None:
    """sync-in-loop: sync waits (not a copy's own) seen in most steps, costed by the gaps they caused."""
    df = rd.trace.intervals
    rows = np.flatnonzero(rd.sync_mask)
    if not len(rows):
        return
    cause = _strings(df["cause"], rows)
    rows = rows[~np.isin(cause, list(COPY_SYNC_CAUSES))]
    if not len(rows):
        return
    cause = _strings(df["cause"], rows)
    source = _sources(rd, rows)
    win = rd.win_row[rows]
    gmask = (gaps.cause == gp.SYNC) & (gaps.sync_row >= 0)
    costs["sync-in-loop"] = gaps.per_window(len(rd.win), gmask)
    blamed = pd.Series(gaps.length[gmask]).groupby(gaps.sync_row[gmask]).sum()
    cost = blamed.reindex(rows, fill_value=0).to_numpy()
    frame = pd.DataFrame({"cause": cause, "source": source, "win": win, "cost": cost})
    frame = frame[frame["win"] >= 0]
    per = frame.groupby(["cause", "source"]).agg(steps=("win", "nunique"), count=("win", "size"), cost=("cost", "sum"))
    loop = per[per["steps"] >= IN_LOOP_STEP_FRAC * n_win].sort_values("cost", ascending=False)
    if loop.empty:
        return
    keep = frame.set_index(["cause", "source"]).index.isin(loop.index)
    total = float(frame["cost"][keep].sum())
    parts = [
        f"{c or 'sync'} at {s or 'unknown source'} ({n / n_win:.1f}/step)"
        for (c, s), n in zip(loop.index, loop["count"], strict=True)
    ][:5]
    detail = (
        f"Host syncs in the loop: {'; '.join(parts)}. Each drains the GPU queue; the GPU then idled "
        f"{_ms(total / n_win)} per step until new work arrived."
    )
    recurring = per[(per["steps"] < IN_LOOP_STEP_FRAC * n_win) & (per["steps"] >= RECURRING_MIN_STEPS)]
    recurring = recurring.sort_values("steps", ascending=False)
    if len(recurring):
        more = [
            f"{c or 'sync'} at {s or 'unknown source'} (every ~{n_win / k:.0f} steps)"
            for (c, s), k in zip(recurring.index, recurring["steps"], strict=True)
        ][:5]
        detail += f" Also in the loop, less often: {'; '.join(more)}."
    named = [*loop.index, *recurring.index]
    pos = frame.index.to_numpy()[keep]
    srows, scost = rows[pos], cost[pos]
    add(
        "sync-in-loop",
        detail,
        tuple(dict.fromkeys(s for (_, s) in named if s))[:5],
        _evidence(rd, srows, rd.s[srows], rd.e[srows], scost + (rd.e[srows] - rd.s[srows]) // 1000),
        sync_fix(tuple(dict.fromkeys(c for (c, _) in named))),
    )
