"""Fixtures for the report tests: prepared sample runs and a run whose names try to inject HTML."""

from __future__ import annotations

import pytest
from report_runs import EVIL, SAMPLES, evil_trace, sample_name

from collector.load import load_trace
from webapp.report import PreparedRun, prepare_run


@pytest.fixture(scope="session")
def prepared_samples() -> dict[str, PreparedRun]:
    """Every sample trace, loaded, analysed and indexed, by file stem."""
    return {sample_name(p): prepare_run(load_trace(p), sample_name(p)) for p in SAMPLES}


@pytest.fixture(scope="session")
def evil_run() -> PreparedRun:
    return prepare_run(evil_trace(), EVIL)
