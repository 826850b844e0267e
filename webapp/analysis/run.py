"""analyze(trace) -> RunAnalysis: metrics, findings and what-if for one run."""

from __future__ import annotations

import pandas as pd

from collector.model import Trace
from webapp.analysis.records import RunAnalysis


def analyze(trace: Trace) -> RunAnalysis:
    """Analyze one run (stub: empty results until the metrics land)."""
    return RunAnalysis(
        metrics={"steps": 0.0, "step_time_median_ns": 0.0, "gpu_busy_frac": 0.0, "copy_compute_overlap_frac": 0.0},
        per_rank=pd.DataFrame(),
        per_step=pd.DataFrame(),
        kernels=pd.DataFrame(),
        sync_sources=pd.DataFrame(),
        findings=(),
        what_if={"step_time_now_ns": 0.0, "step_time_fixed_ns": 0.0},
    )
