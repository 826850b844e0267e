"""Shared by overhead.py and fidelity.py: the loops they run, CUPTI references, clocks and busy time.

The loops are the built-in demos that cover the regimes where GPU timing is hard or easy: launch-bound
(``tiny-ops``), host-bound (``transformer-small``), GPU-bound (``convnet``, ``transformer-large``) and the
teaching demos (``overlap``, ``sync-trap``). A reference is torch.profiler with only the CUDA activity
(CUPTI), read through the same event table and Kineto importer as everything else.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LOOPS = ("tiny-ops", "convnet", "transformer-small", "transformer-large", "overlap", "sync-trap")
GPU_WORK = ("kernel", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memset", "collective")


def sync() -> None:
    import torch

    getattr(torch.cuda.synchronize, "__wrapped__", torch.cuda.synchronize)()


def loop_steps(name: str) -> Iterator[None]:
    """The demo ``name`` as an iterator: each ``next()`` runs one step."""
    import torch

    from collector import demos

    batch, width, depth = demos.sizes(torch.cuda.get_device_properties(0).total_memory)
    return demos.get(name).loop(demos.DemoContext(batch, width, depth))


def step_fn(it: Iterator[None]) -> Callable[[], None]:
    return lambda: next(it)


def clock_pair() -> tuple[int, int]:
    """(monotonic ns, wall ns) read back to back (best of 5)."""
    best: tuple[int, int, int] | None = None
    for _ in range(5):
        m0, w, m1 = time.monotonic_ns(), time.time_ns(), time.monotonic_ns()
        if best is None or m1 - m0 < best[0]:
            best = (m1 - m0, (m0 + m1) // 2, w)
    assert best is not None
    return best[1], best[2]


def mono_to_wall(p0: tuple[int, int], p1: tuple[int, int]) -> Callable[[np.ndarray], np.ndarray]:
    rate = (p1[1] - p0[1]) / max(p1[0] - p0[0], 1)
    return lambda m: p0[1] + np.rint((np.asarray(m, dtype=np.float64) - p0[0]) * rate).astype(np.int64)


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
