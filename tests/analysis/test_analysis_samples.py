"""The analysis on the real sample traces (sample_traces/): findings and the what-if check."""

from __future__ import annotations

from pathlib import Path

import pytest

from collector.load import load_trace
from webapp.analysis import analyze

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _load(name: str):
    path = SAMPLES / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} not present")
    return analyze(load_trace(str(path)))


def _rules(result, at_least: str = "warning") -> set[str]:
    keep = ("warning", "critical") if at_least == "warning" else ("info", "warning", "critical")
    return {f.rule for f in result.findings if f.severity in keep}


def test_overlap_demo_is_clean() -> None:
    assert _rules(_load("overlap")) == set()


def test_naive_estimate_within_10_percent_of_overlap() -> None:
    naive, overlap = _load("naive"), _load("overlap")
    est, measured = naive.what_if["step_time_fixed_ns"], overlap.metrics["step_time_median_ns"]
    assert abs(est - measured) / measured <= 0.10
    assert {"pageable-copy", "no-copy-overlap", "sync-in-loop"} <= _rules(naive)


@pytest.mark.parametrize(
    "name, rule, at_least",
    [
        ("pinned", "no-copy-overlap", "warning"),
        ("sync-trap", "sync-in-loop", "warning"),
        # the d2h demo's blocking copies are its first half only: a cost in half the steps is no loop-wide
        # warning, but it is the costliest finding
        ("d2h", "pageable-copy", "info"),
    ],
)
def test_each_demo_gets_its_finding(name: str, rule: str, at_least: str) -> None:
    result = _load(name)
    assert rule in _rules(result, at_least)
    if at_least == "info":
        assert result.findings[0].rule == rule


def test_sync_trap_names_its_lines() -> None:
    f = next(f for f in _load("sync-trap").findings if f.rule == "sync-in-loop")
    assert any(s.startswith("collector/demos/loops.py:") for s in f.sources)


def test_torch_profiler_overlap_trace_is_clean() -> None:
    from collector.traceformat.spec import TraceFileError

    path = SAMPLES / "torch-profiler-overlap.pt.trace.json.gz"
    if not path.exists():
        pytest.skip(f"{path} not present")
    try:
        trace = load_trace(str(path))
    except TraceFileError as exc:  # the reader's business, not the analysis'
        pytest.skip(f"cannot read the sample yet: {exc}")
    result = analyze(trace)
    assert result.metrics["steps"] >= 2
    assert _rules(result) == set()
