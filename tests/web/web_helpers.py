"""Helpers for the web tests: an XSS-named trace, a run with many exposed-copy windows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from collector.model import Lane, LaneKind, RunMeta, Trace, conform_intervals, empty_markers
from collector.synthetic import synthetic_trace

EVIL = "</script><img src=x onerror=alert(1)>"


def evil_trace(n: int = 400) -> Trace:
    """A small run whose first kernel name, lane label and workload are an XSS attempt."""
    trace = synthetic_trace(n, pattern="naive", steps=4)
    iv = trace.intervals.copy()
    first = iv["name"].cat.categories[0]
    iv["name"] = iv["name"].cat.rename_categories({first: EVIL})
    return Trace(replace(trace.meta, workload=EVIL), trace.lanes, iv, trace.markers)


def copy_trace(n: int, seed: int = 1) -> Trace:
    """A copy stream of ``n`` short copies with random gaps beside a compute stream of a few kernels."""
    rng = np.random.default_rng(seed)
    dur = rng.integers(100, 2_000, n)
    start = np.cumsum(rng.integers(1, 5_000, n) + np.concatenate([[0], dur[:-1]]))
    k_start = np.linspace(0, int(start[-1]), 5, dtype=np.int64)[:-1]
    frame = conform_intervals(
        pd.DataFrame(
            {
                "lane": np.r_[np.zeros(n, int), np.ones(4, int)],
                "rank": 0,
                "lane_kind": ["transfer_stream"] * n + ["compute_stream"] * 4,
                "stream": np.r_[np.full(n, 9), np.full(4, 7)],
                "lane_label": "s",
                "kind": ["memcpy_h2d"] * n + ["kernel"] * 4,
                "name": "x",
                "start_ns": np.r_[start, k_start],
                "end_ns": np.r_[start + dur, k_start + int(start[-1]) // 20],
            }
        )
    )
    lanes = (Lane(0, LaneKind.TRANSFER_STREAM, 9, "copies"), Lane(0, LaneKind.COMPUTE_STREAM, 7, "compute"))
    return Trace(RunMeta(), lanes, frame, empty_markers())
