"""Vectorized interval algebra on int64 nanoseconds: unions, intersections and windowed measures.

All ranks are analysed in one pass by placing each rank on its own stretch of one time axis
(:class:`Timebase`), so a union over "all streams of a rank" is a plain 1-D union. Sets of time are
:class:`Segments`: sorted, disjoint ``[start, end)`` ranges with a prefix sum of their lengths, which
answers "how much of this set lies in [a, b)" for many windows at once with two ``searchsorted`` calls.
Measures of intersections and differences come from unions: ``|A & B| = |A| + |B| - |A | B|``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_MAX_AXIS = 2**62
"""Largest time on the shared axis; a run whose ranks do not fit (span x ranks) is refused."""
CHUNK_ROWS = 1 << 18
"""Rows the routines over a whole run (:func:`union_where`, :func:`window_index`, the kernel table) take at a
time: temporaries of a few MB are reused by the allocator, where run-long ones are fresh memory the kernel must
fault in (most of a long run's cost). A few MB, not tens: the allocator hands larger blocks back to the kernel
as they are freed."""


@dataclass(frozen=True)
class Timebase:
    """Maps (rank, time ns) to one axis: ``t - origin + rank * stride``, ranks far apart."""

    origin: int
    stride: int

    @classmethod
    def fit(cls, lo: int, hi: int, max_rank: int) -> Timebase:
        stride = int(hi) - int(lo) + 1
        if stride <= 0 or stride * (int(max_rank) + 1) >= _MAX_AXIS:
            raise ValueError(f"run spans {stride} ns over {max_rank + 1} ranks, too long to analyse")
        return cls(int(lo), stride)

    def to_axis(self, rank: np.ndarray, t: np.ndarray) -> np.ndarray:
        out = np.asarray(rank, dtype=np.int64) * self.stride  # one array for the result, not one per term
        out += t
        out -= self.origin
        return out

    def to_axis_in_place(self, rank: np.ndarray, t: np.ndarray) -> np.ndarray:
        """:meth:`to_axis` written over ``t`` (int64, the caller's own), CHUNK_ROWS rows at a time: no
        run-long temporary. Returns ``t``."""
        for a in range(0, len(t), CHUNK_ROWS):
            block = t[a : a + CHUNK_ROWS]
            block += np.asarray(rank[a : a + CHUNK_ROWS], dtype=np.int64) * self.stride
            block -= self.origin
        return t

    def from_axis(self, rank: np.ndarray | int, t: np.ndarray | int) -> np.ndarray:
        return np.asarray(t, dtype=np.int64) + self.origin - np.asarray(rank, dtype=np.int64) * self.stride


@dataclass(frozen=True)
class Segments:
    """Sorted disjoint ranges ``[starts[i], ends[i])``; ``cum[i]`` = total length of the first i."""

    starts: np.ndarray
    ends: np.ndarray
    cum: np.ndarray

    @classmethod
    def from_sorted(cls, starts: np.ndarray, ends: np.ndarray) -> Segments:
        cum = np.zeros(len(starts) + 1, dtype=np.int64)
        np.subtract(ends, starts, out=cum[1:])  # the lengths, summed in place: no temporary as long
        np.cumsum(cum[1:], out=cum[1:])
        return cls(starts, ends, cum)

    @property
    def total(self) -> int:
        return int(self.cum[-1])

    def __len__(self) -> int:
        return len(self.starts)

    def covered(self, t: np.ndarray) -> np.ndarray:
        """Length of this set that lies before each time in ``t``."""
        t = np.asarray(t, dtype=np.int64)
        if not len(self.starts):
            return np.zeros(t.shape, dtype=np.int64)
        i = np.searchsorted(self.starts, t, side="right")
        out = self.cum[i].copy()
        has = i > 0
        prev_end = self.ends[np.maximum(i - 1, 0)]
        out -= np.where(has, np.maximum(prev_end - t, 0), 0)
        return out

    def measure_in(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Length of this set inside each window ``[a[i], b[i])``."""
        return self.covered(b) - self.covered(a)


def empty() -> Segments:
    z = np.zeros(0, dtype=np.int64)
    return Segments.from_sorted(z, z)


def union(starts: np.ndarray, ends: np.ndarray) -> Segments:
    """Union of possibly overlapping ranges (any order) as Segments. Empty ranges are dropped."""
    return union_first(starts, ends)[0]


def union_first(starts: np.ndarray, ends: np.ndarray) -> tuple[Segments, np.ndarray]:
    """Union as in :func:`union`, plus for each segment the input index of the range that opens it."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    nonempty = ends > starts
    if nonempty.all():
        idx = None
    else:
        idx = np.flatnonzero(nonempty)
        starts, ends = starts[idx], ends[idx]
    if len(starts) == 0:
        return empty(), np.zeros(0, dtype=np.int64)
    if len(starts) > 1 and not (starts[1:] >= starts[:-1]).all():
        order = np.argsort(starts, kind="stable")  # timsort: fast on runs that are already sorted
        starts, ends = starts[order], ends[order]
        idx = order if idx is None else idx[order]
    run_end = np.maximum.accumulate(ends)
    brk = starts[1:] > run_end[:-1]
    first = np.concatenate(([True], brk))
    last = np.concatenate((brk, [True]))
    opener = np.flatnonzero(first) if idx is None else idx[first]
    return Segments.from_sorted(starts[first], run_end[last]), opener


def union_where(starts: np.ndarray, ends: np.ndarray, mask: np.ndarray) -> tuple[Segments, np.ndarray]:
    """:func:`union_first` of the ranges where ``mask`` holds, with each segment's opener as a row of
    ``starts`` (not an index into the masked ranges). Ranges in start order (one stream's work, as recorded)
    are merged CHUNK_ROWS rows at a time; others are gathered and sorted at once."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    merged = _union_in_order(starts, ends, mask)
    if merged is not None:
        return merged
    rows = np.flatnonzero(mask)
    segs, first = union_first(starts[rows], ends[rows])
    return segs, rows[first]


def _union_in_order(starts: np.ndarray, ends: np.ndarray, mask: np.ndarray) -> tuple[Segments, np.ndarray] | None:
    """:func:`union_where` a block of rows at a time, carrying the running end across blocks; None as soon as
    a non-empty range starts before the one before it (the ranges need a sort). The segments are written
    into arrays as long as the masked rows, of which only the part written is ever touched."""
    most = int(np.count_nonzero(mask))
    seg_s, seg_e, opener = (np.empty(most, dtype=np.int64) for _ in range(3))
    k = 0  # segments opened so far
    reach: int | None = None  # running end of the ranges so far: the open segment's end
    last_start = np.iinfo(np.int64).min
    for a in range(0, len(starts), CHUNK_ROWS):
        block = slice(a, a + CHUNK_ROWS)
        s, e = starts[block], ends[block]
        rows = np.flatnonzero(mask[block] & (e > s))
        if not len(rows):
            continue
        s, e = s[rows], e[rows]
        if s[0] < last_start or not (s[1:] >= s[:-1]).all():
            return None
        run_end = np.maximum.accumulate(e)
        if reach is not None:
            np.maximum(run_end, reach, out=run_end)
        before = np.concatenate(([s[0] if reach is None else reach], run_end[:-1]))  # running end before each
        opening = s > before
        opening[0] |= reach is None
        first = np.flatnonzero(opening)
        new = slice(k, k + len(first))
        seg_s[new], opener[new] = s[first], rows[first] + a
        closed = before[first] if k else before[first[1:]]  # the end of the segment before each new one
        seg_e[k - len(closed) + len(first) - 1 : k + len(first) - 1] = closed
        k += len(first)
        reach, last_start = int(run_end[-1]), int(s[-1])
    if reach is None:
        return empty(), np.zeros(0, dtype=np.int64)
    seg_e[k - 1] = reach
    return Segments.from_sorted(seg_s[:k], seg_e[:k]), opener[:k]


def intersect(a: Segments, b: Segments) -> Segments:
    """Intersection of two Segments: each range of ``a`` against the ranges of ``b`` it overlaps."""
    return intersect_index(a, b)[0]


def intersect_index(a: Segments, b: Segments) -> tuple[Segments, np.ndarray, np.ndarray]:
    """Intersection as in :func:`intersect`, plus for each piece the index of its range in ``a`` and ``b``."""
    none = np.zeros(0, dtype=np.int64)
    if not len(a) or not len(b):
        return empty(), none, none
    lo = np.searchsorted(b.ends, a.starts, side="right")  # first b ending after a starts
    hi = np.searchsorted(b.starts, a.ends, side="left")  # first b starting at or after a ends
    n = np.maximum(hi - lo, 0)
    ai = np.repeat(np.arange(len(a)), n)
    offs = np.arange(len(ai)) - np.repeat(np.cumsum(n) - n, n)
    bi = np.repeat(lo, n) + offs
    s = np.maximum(a.starts[ai], b.starts[bi])
    e = np.minimum(a.ends[ai], b.ends[bi])
    keep = e > s
    if not keep.all():
        s, e, ai, bi = s[keep], e[keep], ai[keep], bi[keep]
    return Segments.from_sorted(s, e), ai, bi


def complement_in(windows: Segments, busy: Segments) -> Segments:
    """The parts of ``windows`` not covered by ``busy`` (e.g. GPU idle time inside steps)."""
    return complement_index(windows, busy)[0]


def complement_index(windows: Segments, busy: Segments) -> tuple[Segments, np.ndarray, np.ndarray]:
    """:func:`complement_in`, plus for each piece its window index and the index of the ``busy`` range
    that follows it (``len(busy)`` when none does)."""
    gap_s = np.concatenate(([np.iinfo(np.int64).min // 2], busy.ends))
    gap_e = np.concatenate((busy.starts, [np.iinfo(np.int64).max // 2]))
    return intersect_index(windows, Segments.from_sorted(gap_s, gap_e))


def window_index(windows: Segments, t: np.ndarray) -> np.ndarray:
    """Index of the window containing each time (``[start, end)``), -1 where none does; CHUNK_ROWS times at
    a time."""
    if not len(windows):
        return np.full(len(t), -1, dtype=np.int64)
    t = np.asarray(t)
    out = np.empty(len(t), dtype=np.int64)
    for a in range(0, len(t), CHUNK_ROWS):
        out[a : a + CHUNK_ROWS] = _window_index(windows, t[a : a + CHUNK_ROWS])
    return out


def _window_index(windows: Segments, t: np.ndarray) -> np.ndarray:
    i = np.searchsorted(windows.starts, t, side="right") - 1
    ok = (i >= 0) & (t < windows.ends[np.maximum(i, 0)])
    return np.where(ok, i, -1)
