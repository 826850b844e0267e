"""collector.synthetic: sizes, shape of the run, and the analysis on every pattern."""

from __future__ import annotations

import pytest

from collector.model import INTERVAL_COLUMNS
from collector.synthetic import PATTERNS, synthetic_trace
from webapp.analysis import analyze


@pytest.mark.parametrize("pattern", PATTERNS)
def test_patterns_build_and_analyse(pattern: str) -> None:
    t = synthetic_trace(3000, ranks=2, steps=3, pattern=pattern, seed=3)
    assert list(t.intervals.columns) == list(INTERVAL_COLUMNS)
    assert abs(len(t.intervals) - 3000) < 3000 * 0.05
    assert (t.intervals["end_ns"] >= t.intervals["start_ns"]).all()
    assert t.intervals["id"].is_unique
    assert len(t.steps()) == 6 and t.ranks == [0, 1]
    result = analyze(t)
    assert len(result.per_step) == 6 and len(result.per_rank) == 2


def test_same_seed_same_run() -> None:
    a = synthetic_trace(1000, seed=5, pattern="naive").intervals
    b = synthetic_trace(1000, seed=5, pattern="naive").intervals
    assert a.equals(b)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="unknown synthetic pattern"):
        synthetic_trace(10, pattern="nope")
    with pytest.raises(ValueError):
        synthetic_trace(0)
