"""A stored analysis (RunAnalysis.to_dict() as JSON) reads back into the same RunAnalysis."""

from __future__ import annotations

import json

from collector.synthetic import synthetic_trace
from webapp.analysis import RunAnalysis, analyze


def test_from_dict_round_trips() -> None:
    ra = analyze(synthetic_trace(2000, pattern="naive", steps=6))
    stored = json.loads(json.dumps(ra.to_dict(), allow_nan=False))
    back = RunAnalysis.from_dict(stored)
    assert back.findings == ra.findings
    assert back.summary() == ra.summary()
    assert back.to_dict() == stored
    assert list(back.per_step.columns) == list(ra.per_step.columns)


def test_from_dict_tolerates_old_dicts() -> None:
    back = RunAnalysis.from_dict({"metrics": {"steps": 3, "gpu_busy_frac": None}})
    assert back.summary()["steps"] == 3
    assert back.findings == () and back.per_step.empty and back.notes == ()
