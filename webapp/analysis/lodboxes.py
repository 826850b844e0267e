"""The boxes of one lane in one view (webapp.analysis.lod): intervals at least a pixel long sent as they are,
narrower ones merged into busy boxes, coarser until the lane fits its box budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_BOXES_PER_LANE = 2000


@dataclass(frozen=True)
class LaneLod:
    """The boxes of one lane in one view. Times are ns on the run clock.

    ``rows``: positions (into the index's sorted run frame) of intervals sent one by one, with their
    ``start_ns``/``end_ns``/``kind`` (codes into collector.model.KIND_NAMES). ``busy_*``: merged boxes, each
    ``[busy_start_ns, busy_end_ns)`` with ``busy_count`` members, ``busy_ns`` busy time (union of the
    members) and ``busy_kind`` the kind that takes most of its time.
    """

    lane: int
    rows: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    kind: np.ndarray
    busy_start_ns: np.ndarray
    busy_end_ns: np.ndarray
    busy_count: np.ndarray
    busy_ns: np.ndarray
    busy_kind: np.ndarray
    px_ns: float  # the merge threshold used (ns per pixel, or coarser)

    @property
    def n_boxes(self) -> int:
        return int(len(self.rows) + len(self.busy_start_ns))


def window_slice(start: np.ndarray, cummax_end: np.ndarray, t0: int, t1: int) -> tuple[int, int]:
    """Index range [i0, i1) of intervals (sorted by start) that may overlap [t0, t1).

    ``cummax_end`` is ``np.maximum.accumulate(end)``; intervals inside the range can still end before
    ``t0`` (callers mask them out).
    """
    i0 = int(np.searchsorted(cummax_end, t0, side="right"))
    i1 = int(np.searchsorted(start, t1, side="left"))
    return i0, max(i0, i1)


@dataclass(frozen=True)
class Folded:
    """Which entries of a window stand for several intervals each (webapp.analysis.lodlevel), entry-aligned:
    ``mask`` marks them; ``count`` is the intervals of each entry (1 for a plain one), ``busy`` the union of a
    folded entry's intervals (ns) and ``packed`` its longest one as merge_narrow packs it (duration * 16 +
    kind). A folded entry is never wide; its intervals would never be split between boxes, and every interval
    merged before it ends at or before its start or at or after its end."""

    mask: np.ndarray
    count: np.ndarray
    busy: np.ndarray
    packed: np.ndarray

    def take(self, keep: np.ndarray) -> Folded:
        return Folded(self.mask[keep], self.count[keep], self.busy[keep], self.packed[keep])


def merge_narrow(
    s: np.ndarray, e: np.ndarray, kind: np.ndarray, px_ns: float, folded: Folded | None = None
) -> tuple[np.ndarray, ...]:
    """Merge intervals (sorted by start, clipped) whose gaps are under ``px_ns`` into busy boxes.

    Returns (first, box_start, box_end, count, busy_ns, dominant_kind); ``first`` is the index of each
    box's first member. busy_ns is the exact length of the union of each box's members. ``folded`` marks
    entries that stand for several intervals (their ``e`` is their latest end).
    """
    n = len(s)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty, empty, np.zeros(0, dtype=np.int8)
    prev_max = max_before(np.maximum.accumulate(e))
    breaks = np.empty(n, dtype=bool)
    breaks[0] = True
    breaks[1:] = s[1:] - prev_max[1:] >= px_ns
    first = np.flatnonzero(breaks)
    contrib = np.maximum(0, e - np.maximum(s, prev_max))
    # the kind of each box's longest member: duration and kind packed into one int64, max per box
    packed = (e - s) * 16 + kind.astype(np.int64)
    if folded is None:
        count = np.diff(np.append(first, n))
    else:  # a folded entry adds all of its busy time, or none when an earlier interval covers it
        contrib = np.where(folded.mask, np.where(prev_max <= s, folded.busy, 0), contrib)
        packed = np.where(folded.mask, folded.packed, packed)
        count = np.add.reduceat(folded.count, first)
    busy = np.add.reduceat(contrib, first)
    box_end = np.maximum.reduceat(e, first)
    dominant = (np.maximum.reduceat(packed, first) % 16).astype(np.int8)
    return first, s[first], box_end, count, busy, dominant


def first_px(span_ns: int, width_px: int, cap: int) -> float:
    """The merge threshold a view of ``span_ns`` starts from: one pixel, or coarser to fit ``cap`` boxes."""
    return max(1.0, span_ns / max(1, width_px), span_ns / max(1, cap))


def lod_lane(
    lane: int,
    start: np.ndarray,
    end: np.ndarray,
    kind: np.ndarray,
    cummax_end: np.ndarray,
    t0: int,
    t1: int,
    width_px: int,
    cap: int = MAX_BOXES_PER_LANE,
) -> LaneLod:
    """Boxes of one lane (arrays sorted by start) for the window [t0, t1) drawn ``width_px`` wide."""
    i0, i1 = window_slice(start, cummax_end, t0, t1)
    s_all, e_all = start[i0:i1], end[i0:i1]
    visible = (e_all > t0) | (s_all >= t0)
    idx = np.flatnonzero(visible) + i0 if not visible.all() else np.arange(i0, i1)
    s, e = np.maximum(start[idx], t0), np.minimum(end[idx], t1)
    return lane_boxes(lane, idx, s, e, kind[idx], start, end, t1 - t0, width_px, cap)


def lane_boxes(
    lane: int,
    idx: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    k: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    span_ns: int,
    width_px: int,
    cap: int,
    folded: Folded | None = None,
) -> LaneLod:
    """Boxes of one lane from the entries of a window ``span_ns`` long: ``idx`` their positions in
    ``start``/``end``, ``s``/``e`` their times clipped to the window and ``k`` their kinds; ``folded``
    marks entries that stand for several intervals."""
    dur = e - s
    span = max(1, span_ns)
    px = first_px(span, width_px, cap)
    while True:
        wide = dur >= px
        if folded is not None:
            wide &= ~folded.mask
        narrow = ~wide
        some = None if folded is None else folded.take(narrow)
        first, b_s, b_e, b_n, b_busy, b_k = merge_narrow(s[narrow], e[narrow], k[narrow], px, some)
        n_boxes = int(wide.sum()) + len(first)
        if n_boxes <= cap or px >= span:
            break
        px *= max(1.5, n_boxes / cap)
    single = b_n == 1
    narrow_idx = np.flatnonzero(narrow)
    rows = np.concatenate([np.flatnonzero(wide), narrow_idx[first[single]]])
    rows.sort()
    multi = ~single
    return LaneLod(
        lane=lane,
        rows=idx[rows],
        start_ns=start[idx[rows]],
        end_ns=end[idx[rows]],
        kind=k[rows],
        busy_start_ns=b_s[multi],
        busy_end_ns=b_e[multi],
        busy_count=b_n[multi],
        busy_ns=b_busy[multi],
        busy_kind=b_k[multi],
        px_ns=px,
    )


def max_before(run_max: np.ndarray) -> np.ndarray:
    """The largest end before each interval, from the running maximum of ends (int64 min for the first)."""
    out = np.empty(len(run_max), dtype=np.int64)
    out[0] = np.iinfo(np.int64).min
    out[1:] = run_max[:-1]
    return out
