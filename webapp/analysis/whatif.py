"""What-if: the step time if the copy and sync findings were fixed.

Per step window: ``fixed = step_time - savings`` where savings are the costs of ``pageable-copy`` (pageable
copies made pinned, at the probed pinned bandwidth), ``no-copy-overlap`` (the remaining exposed copy time
hidden behind compute), ``blocking-copy`` and ``sync-in-loop`` (the GPU gaps they cause removed). A step
cannot get shorter than its compute, its copies at pinned speed, or the host's time to issue the work, so
``fixed`` is raised to that floor. The estimate is the median of ``fixed`` over all steps.
``launch-bound`` and ``idle-gaps`` savings are reported as potentials but not applied: their fixes
(CUDA graphs, data loading) change more than one can predict from the trace. ``costs`` holds the rules
of the listed findings only, so every saving matches a finding the user sees.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

APPLIED = ("pageable-copy", "no-copy-overlap", "blocking-copy", "sync-in-loop")


def fixed_per_step(per_step: pd.DataFrame, costs: dict[str, np.ndarray], pinned_gbps: float) -> np.ndarray:
    """Estimated step time per row of ``per_step`` (ns) once the APPLIED findings are fixed."""
    now = per_step["step_time_ns"].to_numpy(np.float64)
    saving = np.zeros(len(per_step))
    for rule in APPLIED:
        if rule in costs:
            saving += costs[rule]
    copy_floor = (
        per_step["copy_bytes"].to_numpy(np.float64) / pinned_gbps
        if pinned_gbps == pinned_gbps and pinned_gbps > 0
        else 0.0
    )
    floor = (
        np.maximum.reduce(
            [
                per_step["compute_busy_ns"].to_numpy(np.float64),
                per_step["host_issue_ns"].to_numpy(np.float64),
                np.broadcast_to(copy_floor, now.shape),
            ]
        )
        if len(now)
        else now
    )
    return np.minimum(now, np.maximum(now - saving, floor))


def what_if(per_step: pd.DataFrame, costs: dict[str, np.ndarray], pinned_gbps: float) -> dict[str, float]:
    """``step_time_now_ns`` and ``step_time_fixed_ns`` (medians over steps), ``speedup`` (now / fixed),
    ``saving_<rule>_ns`` (mean per step, every rule in ``costs``) and ``applied`` rules' total ``saving_applied_ns``."""
    if per_step.empty:
        return {"step_time_now_ns": math.nan, "step_time_fixed_ns": math.nan, "speedup": math.nan}
    fixed = fixed_per_step(per_step, costs, pinned_gbps)
    now = float(per_step["step_time_ns"].median())
    est = float(np.median(fixed))
    out = {
        "step_time_now_ns": now,
        "step_time_fixed_ns": est,
        "speedup": now / est if est > 0 else math.nan,
        "saving_applied_ns": now - est,
    }
    for rule, cost in costs.items():
        out[f"saving_{rule.replace('-', '_')}_ns"] = float(np.mean(cost)) if len(cost) else 0.0
    return out
