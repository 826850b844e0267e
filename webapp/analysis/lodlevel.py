"""A coarse level of a run's index for wide windows: each lane's runs of short, closely spaced intervals folded
into one entry, so a view of the whole run costs work per run instead of per interval, and draws exactly the
boxes the intervals one by one give (webapp.analysis.lodboxes).

The level is made for one threshold ``p0_ns``: the run's span / LEVEL_WIDTH_PX, the pixel of the widest
whole-run view. A *fold* is a run of two or more consecutive intervals of one lane (sorted by start) that

- are each shorter than ``p0_ns`` and each start less than ``p0_ns`` after the latest end of the lane's
  earlier short intervals: at any merge threshold of at least ``p0_ns`` they are narrow and never split
  between boxes;
- start after every earlier short interval of the lane has ended, while no earlier long one ends inside
  the fold (after its start, before its latest end): whatever is merged before the fold ends at or before
  its start (the fold adds all its busy time) or at or after its end (it adds none).

A view whose first merge threshold is at least ``p0_ns`` takes each fold lying wholly inside its window as
one entry and every other interval as itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from webapp.analysis.lodboxes import Folded, LaneLod, first_px, lane_boxes, max_before

LEVEL_WIDTH_PX = 10_000
"""The widest view (pixels) of the whole run that the level serves: the timeline API's largest width."""
PARTS = ("first", "count", "end", "busy", "packed")
"""The level's arrays, one value per fold (what webapp.index_files saves)."""


@dataclass(frozen=True)
class Level:
    """The folds of a run's index, all lanes together, ordered by ``first``: the row position (in the index)
    of each fold's first interval, ``count`` its intervals, ``end`` its latest end (ns), ``busy`` the union of
    its intervals (ns) and ``packed`` its longest interval (duration * 16 + kind code)."""

    p0_ns: float
    first: np.ndarray
    count: np.ndarray
    end: np.ndarray
    busy: np.ndarray
    packed: np.ndarray

    @classmethod
    def build(
        cls, start: np.ndarray, end: np.ndarray, kind: np.ndarray, lane_bounds: list[tuple[int, int]], span_ns: int
    ) -> Level:
        """The level of an index's row arrays (sorted by lane, then start) for a run ``span_ns`` long."""
        p0 = max(1.0, span_ns / LEVEL_WIDTH_PX)
        parts = [_folds(start[lo:hi], end[lo:hi], kind[lo:hi], p0, lo) for lo, hi in lane_bounds if hi - lo > 1]
        arrays = [np.concatenate([p[i] for p in parts] or [np.zeros(0, np.int64)]) for i in range(len(PARTS))]
        return cls(p0, *arrays)

    def lane(
        self,
        lane: int,
        arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
        rows: tuple[int, int],
        t0: int,
        t1: int,
        width_px: int,
        cap: int,
    ) -> LaneLod | None:
        """The boxes of one lane for [t0, t1) from the index's (start, end, kind) ``arrays``, whose rows
        ``[rows[0], rows[1])`` are the lane's slice of the window (lod.window_slice); None when the level
        cannot serve the view (a merge threshold under ``p0_ns``, or no fold wholly inside the window)."""
        if first_px(t1 - t0, width_px, cap) < self.p0_ns:
            return None
        start, end, kind = arrays
        r0, r1 = rows
        a0, a1 = np.searchsorted(self.first, [r0, r1])
        f, c = self.first[a0:a1], self.count[a0:a1]
        keep = (f + c <= r1) & (start[f] >= t0) & (self.end[a0:a1] <= t1)
        if not keep.any():
            return None
        kf, kc = f[keep], c[keep]
        # entries in row order: the rows before the first kept fold, that fold, the rows up to the next, ...
        lengths = np.empty(2 * len(kf) + 1, dtype=np.int64)
        lengths[0::2] = np.append(kf, r1) - np.concatenate([[r0], kf + kc])
        lengths[1::2] = 1
        block = np.empty(len(lengths), dtype=np.int64)
        block[0::2] = np.concatenate([[r0], kf + kc])
        block[1::2] = kf
        offsets = np.cumsum(lengths) - lengths
        pos = np.arange(int(lengths.sum())) + np.repeat(block - offsets, lengths)
        is_fold = np.repeat(np.arange(len(lengths)) % 2 == 1, lengths)
        s, e = start[pos], end[pos]
        visible = is_fold | (e > t0) | (s >= t0)
        pos, s, e, is_fold = pos[visible], s[visible], e[visible], is_fold[visible]
        count = np.ones(len(pos), dtype=np.int64)
        busy = np.zeros(len(pos), dtype=np.int64)
        packed = np.zeros(len(pos), dtype=np.int64)
        e = np.minimum(e, t1)
        e[is_fold] = self.end[a0:a1][keep]
        count[is_fold] = kc
        busy[is_fold] = self.busy[a0:a1][keep]
        packed[is_fold] = self.packed[a0:a1][keep]
        folded = Folded(is_fold, count, busy, packed)
        return lane_boxes(lane, pos, np.maximum(s, t0), e, kind[pos], start, end, t1 - t0, width_px, cap, folded)


def _folds(s: np.ndarray, e: np.ndarray, kind: np.ndarray, p0: float, lo: int) -> tuple[np.ndarray, ...]:
    """The folds of one lane (arrays sorted by start, at least two rows), as Level's PARTS; ``lo`` is the
    lane's first row in the index."""
    n = len(s)
    dur = e - s
    short = dur < p0
    # the latest end of the earlier short intervals (the first start where there is none: no overflow)
    before = max_before(np.maximum.accumulate(np.where(short, e, s[0])))
    join = np.zeros(n, dtype=bool)
    join[1:] = short[1:] & short[:-1] & (s[1:] - before[1:] < p0)
    heads = np.flatnonzero(~join)
    count = np.diff(np.append(heads, n))
    fold_end = np.maximum.reduceat(e, heads)
    busy = np.add.reduceat(np.where(join, np.maximum(0, e - np.maximum(s, before)), dur), heads)
    packed = np.maximum.reduceat(dur * 16 + kind.astype(np.int64), heads)
    long_ends = np.sort(e[~short])
    inside = np.searchsorted(long_ends, fold_end, "left") - np.searchsorted(long_ends, s[heads], "right")
    ok = (count >= 2) & (before[heads] <= s[heads]) & (inside == 0)
    return heads[ok] + lo, count[ok], fold_end[ok], busy[ok], packed[ok]
