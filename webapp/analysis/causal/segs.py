"""Segmented scans on int64 arrays: running sums and maxima that restart at each segment.

``seg`` holds a segment id per element, nondecreasing (elements of one segment are contiguous).
"""

from __future__ import annotations

import numpy as np

NEG = np.iinfo(np.int64).min // 4
"""Minus infinity for max-plus arithmetic: adding a step time to it never overflows."""


def starts_of(seg: np.ndarray) -> np.ndarray:
    """Boolean mask of the first element of each segment."""
    first = np.ones(len(seg), dtype=bool)
    if len(seg) > 1:
        first[1:] = seg[1:] != seg[:-1]
    return first


def first_index(seg: np.ndarray) -> np.ndarray:
    """Index of the first element of each element's segment."""
    first = starts_of(seg)
    return np.maximum.accumulate(np.where(first, np.arange(len(seg)), 0))


def seg_cumsum(values: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Inclusive running sum of ``values`` within each segment."""
    total = np.cumsum(values, dtype=np.int64)
    if not len(values):
        return total
    head = first_index(seg)
    return total - total[head] + values[head]


def seg_cummax(values: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Inclusive running maximum of ``values`` within each segment; NEG (minus infinity) is allowed."""
    values = np.asarray(values, dtype=np.int64)
    if not len(values):
        return values.copy()
    first = starts_of(seg)
    heads = np.flatnonzero(first)
    number = np.cumsum(first) - 1
    real = values > NEG
    if not real.any():
        return values.copy()
    lo_all = int(values[real].min())
    v = np.where(real, values, lo_all - 1)  # minus infinity as one below every real value
    lo = np.minimum.reduceat(v, heads)
    hi = np.maximum.reduceat(v, heads)
    span = int((hi - lo).max()) + 1
    if span * (int(number[-1]) + 1) < 2**62:
        shifted = v - lo[number] + number * span  # each segment lies above every earlier one
        out = np.maximum.accumulate(shifted) - number * span + lo[number]
    else:  # too wide for one shifted scan: one scan per segment
        out = v.copy()
        bounds = np.append(heads, len(v))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            out[a:b] = np.maximum.accumulate(v[a:b])
    return np.where(out < lo_all, NEG, out)


def take(values: np.ndarray, idx: np.ndarray, fill: int) -> np.ndarray:
    """``values[idx]`` where ``idx >= 0``, ``fill`` elsewhere (also when ``values`` is empty)."""
    idx = np.asarray(idx, dtype=np.int64)
    if not len(values):
        return np.full(idx.shape, fill, dtype=np.int64)
    return np.where(idx >= 0, values[np.maximum(idx, 0)], fill)


def latest_in_rank(rank: np.ndarray, t: np.ndarray, q_rank: np.ndarray, q_t: np.ndarray) -> np.ndarray:
    """For each query (``q_rank``, ``q_t``): the index of the latest entry of its rank at or before ``q_t`` in
    (``rank``, ``t``), sorted by rank then time; -1 where its rank has none."""
    out = np.full(len(q_t), -1, dtype=np.int64)
    for r in np.unique(q_rank).tolist():
        lo, hi = np.searchsorted(rank, r, side="left"), np.searchsorted(rank, r, side="right")
        q = q_rank == r
        i = np.searchsorted(t[lo:hi], q_t[q], side="right") - 1
        out[q] = np.where(i >= 0, lo + i, -1)
    return out
