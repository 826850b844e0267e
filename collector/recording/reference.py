"""A CUPTI reference for checking recorded timings: torch.profiler with only the CUDA activity, and the
interval arithmetic to compare a recording with it (busy time per window, busy time counted while the
reference GPU was idle, interval edge errors). Used by the GPU tests and benchmarks/fidelity.py.

All times are int64 ns; ``(s, e)`` pairs are interval starts and ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from collector.model import GPU_KINDS
from collector.recording.clock import ClockLine, clock_pair

GPU_WORK = tuple(k.value for k in GPU_KINDS)


def mono_to_wall(p0: tuple[int, int], p1: tuple[int, int]) -> Callable[[np.ndarray], np.ndarray]:
    """Monotonic ns -> wall ns through two :func:`clock_pair` readings (the recorder's own line)."""
    return ClockLine(p0, p1).array


class Reference:
    """torch.profiler with the CUDA activity only (CUPTI): ``start()``, ``stop()`` -> GPU work (start, end) ns."""

    def __init__(self) -> None:
        import torch

        self._prof: Any = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])

    def start(self) -> None:
        self._prof.start()

    def stop(self) -> tuple[np.ndarray, np.ndarray]:
        from collector.importers.kineto import trace_from_kineto
        from collector.recording.kineto_capture import event_table

        self._prof.stop()
        trace = trace_from_kineto(event_table(self._prof.profiler.kineto_results.events()))
        return gpu_work(trace)


def gpu_work(trace: Any) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of a trace's kernels, copies and memsets."""
    iv = trace.intervals
    work = iv[iv["kind"].astype(str).isin(GPU_WORK)]
    return work["start_ns"].to_numpy(np.int64), work["end_ns"].to_numpy(np.int64)


def union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged, sorted, disjoint intervals covering the same time."""
    if len(s) == 0:
        return s, e
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def busy_in(s: np.ndarray, e: np.ndarray, w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """GPU busy ns inside each window [w0, w1) (union of the intervals, clipped)."""
    us, ue = union(s, e)
    out = np.zeros(len(w0), dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(ue - us)])
    for i, (a, b) in enumerate(zip(w0, w1, strict=True)):  # a few windows (steps), not intervals
        lo, hi = np.searchsorted(ue, a, side="right"), np.searchsorted(us, b, side="left")
        if hi <= lo:
            continue
        total = cum[hi] - cum[lo]
        total -= max(0, a - us[lo]) + max(0, ue[hi - 1] - b)
        out[i] = max(total, 0)
    return out


def covered_idle(s: np.ndarray, e: np.ndarray, rs: np.ndarray, re: np.ndarray) -> int:
    """ns that ``(s, e)`` counts as busy while the reference ``(rs, re)`` had the GPU idle."""
    us, ue = union(s, e)
    return int((ue - us).sum() - busy_in(rs, re, us, ue).sum())


def edge_errors(s: np.ndarray, e: np.ndarray, rs: np.ndarray, re: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per interval of ours holding reference work (by midpoint): start - first reference start, end - last
    reference end (ns)."""
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    mid = (rs + re) // 2
    i = np.searchsorted(s, mid, side="right") - 1
    ok = (i >= 0) & (mid < e[np.maximum(i, 0)])
    if not ok.any():
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64)
    idx = i[ok]
    first = np.full(len(s), np.iinfo(np.int64).max)
    last = np.full(len(s), np.iinfo(np.int64).min)
    np.minimum.at(first, idx, rs[ok])
    np.maximum.at(last, idx, re[ok])
    has = first < np.iinfo(np.int64).max
    return s[has] - first[has], e[has] - last[has]


__all__ = [
    "GPU_WORK",
    "Reference",
    "busy_in",
    "clock_pair",
    "covered_idle",
    "edge_errors",
    "gpu_work",
    "mono_to_wall",
    "union",
]
