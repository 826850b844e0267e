"""Prefix arrays of a long lane (lod.RunIndex): windows holding very many intervals cost a compare over
the slice plus work per box, with boxes the runs between gaps of at least one pixel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from webapp.analysis.lodboxes import LaneLod, max_before


class RunIndex(Protocol):
    """What a coarse lane reads of webapp.analysis.lod.RunIndex: per-interval columns in lane order."""

    start: np.ndarray
    end: np.ndarray
    cummax: np.ndarray
    kind: np.ndarray


@dataclass(frozen=True)
class Coarse:
    """Prefix arrays of one long lane for windows with many intervals.

    ``busy_cum[i]``: union length of the lane's first i intervals (sorted by start); ``kind_cum[k][i]``
    the same split by kind (kinds present on the lane only). A window's boxes are the runs of intervals
    separated by gaps of at least one pixel: each box's busy time is a difference of two prefix sums.
    """

    lo: int
    index: RunIndex
    busy_cum: np.ndarray
    kinds: np.ndarray
    kind_cum: np.ndarray  # shape (len(kinds), n + 1)
    gap_order: np.ndarray  # positions (in the lane) with a gap >= 1 ns before them, largest gap first
    gap_neg_sorted: np.ndarray  # -gap in that order (ascending), for searchsorted

    @classmethod
    def build(cls, index: RunIndex, lo: int, hi: int) -> Coarse:
        s, e = index.start[lo:hi], index.end[lo:hi]
        pm = max_before(index.cummax[lo:hi])
        contrib = np.maximum(0, e - np.maximum(s, pm))
        busy_cum = np.zeros(hi - lo + 1, dtype=np.int64)
        np.cumsum(contrib, out=busy_cum[1:])
        k = index.kind[lo:hi]
        kinds = np.unique(k)
        if len(kinds) == 1:  # one kind: its prefix sums are busy_cum's (a view, no copy)
            kind_cum = busy_cum.reshape(1, -1)
        else:
            kind_cum = np.zeros((len(kinds), hi - lo + 1), dtype=np.int64)
            for row, code in enumerate(kinds):  # one pass per kind present on the lane (a handful)
                np.cumsum(np.where(k == code, contrib, 0), out=kind_cum[row, 1:])
        return cls(lo, index, busy_cum, kinds, kind_cum, *gap_order(s[1:], pm[1:]))

    def view(self, lane: int, a: int, b: int, t0: int, t1: int, width_px: int, cap: int) -> LaneLod:
        ix = self.index
        span = max(1, t1 - t0)
        px = max(1.0, span / max(1, width_px), span / max(1, cap - 1))
        # a >= lo: the gap before each interval is to the previous ends of the same lane
        f, last = runs(
            (self.gap_order, self.gap_neg_sorted),
            a - self.lo,
            b - self.lo,
            px,
            lambda: ix.start[a + 1 : b] - ix.cummax[a : b - 1],
        )
        la = last + 1
        busy = self.busy_cum[la] - self.busy_cum[f]
        count = la - f
        first, last = f + self.lo, last + self.lo
        dominant = self.kinds[(self.kind_cum[:, la] - self.kind_cum[:, f]).argmax(axis=0)].astype(np.int8)
        single = count == 1
        multi = ~single
        rows = first[single]
        return LaneLod(
            lane=lane,
            rows=rows,
            start_ns=ix.start[rows],
            end_ns=ix.end[rows],
            kind=ix.kind[rows],
            busy_start_ns=ix.start[first[multi]],
            busy_end_ns=ix.cummax[last[multi]],
            busy_count=count[multi],
            busy_ns=busy[multi],
            busy_kind=dominant[multi],
            px_ns=px,
        )


def gap_order(start: np.ndarray, prev_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions i >= 1 whose gap ``start[i-1] - prev_end[i-1]`` (arguments shifted by one) is at least
    1 ns, largest gap first, and the negated gaps in that order (ascending, for searchsorted)."""
    gap = start - prev_end
    wide = np.flatnonzero(gap >= 1)  # a box boundary needs a gap of at least one pixel (>= 1 ns)
    order = (wide[np.argsort(-gap[wide], kind="stable")] + 1).astype(np.int32)
    return order, -gap[order - 1]


def runs(
    gaps: tuple[np.ndarray, np.ndarray], a: int, b: int, px: float, window_gaps: Callable[[], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) positions of the runs of [a, b) separated by gaps of at least ``px``; ``gaps`` is
    :func:`gap_order`'s answer for the whole array, ``window_gaps()`` the gaps before a+1 .. b-1 (asked
    only when that many gaps are so wide that scanning the window is cheaper)."""
    order, neg_sorted = gaps
    k = int(np.searchsorted(neg_sorted, -px, side="right"))  # gaps of at least px
    if k < b - a:  # few wide gaps in the whole array: pick those inside the window
        cand = order[:k].astype(np.int64)
        inside = np.sort(cand[(cand > a) & (cand < b)])
    else:
        inside = np.flatnonzero(window_gaps() >= px) + a + 1
    first = np.concatenate([[a], inside]).astype(np.int64)
    return first, np.append(first[1:], b) - 1
