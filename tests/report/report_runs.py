"""Runs for the report tests: the sample traces and a run whose names try to inject HTML."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from collector.model import Trace
from collector.synthetic import synthetic_trace
from webapp import PACKAGE_ROOT

SAMPLES = sorted((PACKAGE_ROOT / "sample_traces").glob("*.json.gz"))
EVIL = "</script><img src=x onerror=alert(1)>"


def sample_name(path: Path) -> str:
    return path.name.split(".")[0]


def evil_trace() -> Trace:
    """A small sync-trap run whose workload and first interval name are an HTML injection attempt."""
    t = synthetic_trace(800, pattern="sync-trap", steps=3)
    iv = t.intervals.copy()
    iv["name"] = iv["name"].cat.rename_categories({iv["name"].cat.categories[0]: EVIL})
    return Trace(replace(t.meta, workload=EVIL), t.lanes, iv, t.markers)
