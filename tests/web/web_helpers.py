"""Helpers for the web tests: an XSS-named trace."""

from __future__ import annotations

from dataclasses import replace

from collector.model import Trace
from collector.synthetic import synthetic_trace

EVIL = "</script><img src=x onerror=alert(1)>"


def evil_trace(n: int = 400) -> Trace:
    """A small run whose first kernel name, lane label and workload are an XSS attempt."""
    trace = synthetic_trace(n, pattern="naive", steps=4)
    iv = trace.intervals.copy()
    first = iv["name"].cat.categories[0]
    iv["name"] = iv["name"].cat.rename_categories({first: EVIL})
    return Trace(replace(trace.meta, workload=EVIL), trace.lanes, iv, trace.markers)
