"""What-if: the step time if every listed finding were fixed, their graph changes replayed together.

Per step window: ``fixed = now - (base - replayed)`` where ``now`` is the step time unrecorded (the measured
time less the recorder's own cost, as replayed), ``base`` the replay of the graph without the recorder and
``replayed`` its replay with every listed finding's change applied one after another (rule order). The
estimate is the median over steps. A straggler across ranks (webapp.analysis.ranks) is replayed with the
others where its collectives are in the graph (the other ranks' collectives stop waiting for it, and its own
steps then keep pace with theirs); where they are not (collectives on host threads), its measured wait is
subtracted on top.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from webapp.analysis.causal.graph import Graph
from webapp.analysis.ranks import RankAnalysis, lockstep
from webapp.analysis.records import Finding, rule_key
from webapp.analysis.rules.base import Detection, RuleContext


def fixed_per_step(ctx: RuleContext, now: np.ndarray, fixes: Sequence[Detection]) -> np.ndarray:
    """Estimated step time per window (ns) with the detections' changes applied together (and no shorter than
    any of their floors)."""
    if not fixes:
        return now.astype(np.float64)

    def together(graph: Graph) -> Graph:
        for det in fixes:
            graph = det.change(graph)
        return graph

    fixed = np.maximum(now - ctx.saving(together), 0).astype(np.float64)
    for det in fixes:
        if det.floor is not None:
            fixed = np.maximum(fixed, np.minimum(det.floor, now))
    return fixed


def straggler_fixed(
    ctx: RuleContext, rk: RankAnalysis, now: np.ndarray, fixed: np.ndarray, others: Sequence[Detection]
) -> np.ndarray:
    """``fixed`` (per window, ns) with the straggler of ``rk`` fixed too: its graph change replayed together
    with ``others`` (the listed findings' detections) where it has one, else its cost per step subtracted."""
    if rk.finding is None:
        return fixed
    if rk.change is None:
        return np.maximum(fixed - rk.finding.cost_per_step_ns, 0)
    together = fixed_per_step(ctx, now, [*others, Detection("", rk.change)])
    return lockstep(ctx.rd, together, int(rk.section["straggler"]["rank"]))


def what_if(
    now: np.ndarray, fixed: np.ndarray, applied: Sequence[Finding], recorded: np.ndarray | None = None
) -> dict[str, float]:
    """``step_time_now_ns`` and ``step_time_fixed_ns`` (medians over steps), ``speedup`` (now / fixed),
    ``saving_applied_ns`` and ``saving_<rule>_ns`` for exactly the applied findings (each its own replayed
    cost per step); ``step_time_recorded_ns`` (the measured median) when the recorder's cost was taken out."""
    if not len(now):
        return {"step_time_now_ns": math.nan, "step_time_fixed_ns": math.nan, "speedup": math.nan}
    med_now = float(np.median(now))
    est = float(np.median(fixed))
    out = {
        "step_time_now_ns": med_now,
        "step_time_fixed_ns": est,
        "speedup": med_now / est if est > 0 else math.nan,
        "saving_applied_ns": med_now - est,
    }
    if recorded is not None:
        out["step_time_recorded_ns"] = float(np.median(recorded))
    for f in applied:
        out[rule_key("saving", f.rule)] = float(f.cost_per_step_ns)
    return out
