"""compare(a, b) -> Comparison: metrics side by side, per-op changes, findings fixed/new, step alignment."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from collector.model import Trace
from webapp.analysis.records import RunAnalysis, frame_records


@dataclass(frozen=True)
class Comparison:
    """Run A against run B (stub)."""

    a: Trace
    b: Trace
    analysis_a: RunAnalysis
    analysis_b: RunAnalysis
    metrics: pd.DataFrame
    ops: pd.DataFrame
    findings: dict[str, list[str]]

    def step_aligned(self, a_step: int, b_step: int, rank: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
        return pd.DataFrame(), pd.DataFrame()

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": frame_records(self.metrics),
            "ops": frame_records(self.ops),
            "findings": {k: list(v) for k, v in self.findings.items()},
        }


def compare(a: Trace, b: Trace) -> Comparison:
    from webapp.analysis.run import analyze

    return Comparison(
        a, b, analyze(a), analyze(b), pd.DataFrame(), pd.DataFrame(), {"fixed": [], "new": [], "unchanged": []}
    )
