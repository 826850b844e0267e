"""Sets of time intervals as sorted disjoint [start, end) int64 ns arrays: union, intersection, difference.

Vectorized numpy; used by the level-of-detail index for the windows where copies run and no compute does.
"""

from __future__ import annotations

import numpy as np


def union(start: np.ndarray, end: np.ndarray, presorted: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted disjoint [start, end) pairs (touching intervals join)."""
    if len(start) == 0:
        return start.astype(np.int64), end.astype(np.int64)
    if presorted:
        s, e = start, end
    else:
        order = np.argsort(start, kind="stable")
        s, e = start[order], end[order]
    run_max = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s)) - 1
    return s[first], run_max[last]


def intersect(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two sorted disjoint interval sets (cost grows with the output, not with B)."""
    j0 = np.searchsorted(b_end, a_start, side="right")
    j1 = np.searchsorted(b_start, a_end, side="left")
    n = np.maximum(0, j1 - j0)
    if n.sum() == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ai = np.repeat(np.arange(len(a_start)), n)
    offsets = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    bj = j0[ai] + offsets
    s, e = np.maximum(a_start[ai], b_start[bj]), np.minimum(a_end[ai], b_end[bj])
    keep = e > s
    return s[keep], e[keep]


def subtract(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Parts of the sorted disjoint set A not covered by the sorted disjoint set B."""
    if len(b_start) == 0:
        return a_start, a_end
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    gaps_s = np.concatenate([[lo], b_end])
    gaps_e = np.concatenate([b_start, [hi]])
    keep = gaps_e > gaps_s
    return intersect(a_start, a_end, gaps_s[keep], gaps_e[keep])
