"""The queue between host and device: how many launched-but-unfinished ops a stream holds over time.

An op (kernel, copy, memset, collective) joins its stream's queue when the host has queued it and leaves
when it ends on the GPU. It is queued at ``enqueue_ns = min(launch end, GPU start)`` when its ``launch_id``
names the CPU interval that launched it (the call has returned, or the GPU already started it), and at its
GPU start without a link. So the depth counts the op running now plus the ops waiting behind it.

How far ahead the host is (``lead_ns``) at time t: the latest GPU end of the ops queued by t, minus t
(0 when the queue is empty): how long the stream would stay busy with work already queued if the host
stopped issuing now.

:class:`LaneQueue` holds one stream's queue as a step function built once (sorted event times, depth and
horizon after each); :meth:`LaneQueue.view` answers one window at pixel resolution (max depth and max
lead per pixel) in O(events in the window), with no Python loop over intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_NEG = np.iinfo(np.int64).min // 2
CHUNK_OPS = 1 << 17
"""Ops :func:`median_depth` takes at a time: arrays of a few MB are reused by the allocator, where arrays
of the whole run are fresh memory the kernel must fault in each time (most of a long run's cost)."""


def enqueue_times(start_ns: np.ndarray, launch_row: np.ndarray, launch_end_ns: np.ndarray) -> np.ndarray:
    """When each GPU op joined its queue, ns: ``min(launch end, start)``, or ``start`` without a launch.

    ``launch_row`` holds the row (into ``launch_end_ns``) of each op's launch, -1 where there is none.
    """
    start_ns = np.asarray(start_ns, dtype=np.int64)
    linked = launch_row >= 0
    launch_end = np.asarray(launch_end_ns, dtype=np.int64)[np.maximum(launch_row, 0)] if len(launch_end_ns) else 0
    return np.where(linked, np.minimum(launch_end, start_ns), start_ns)


@dataclass(frozen=True)
class LaneQueue:
    """One stream's queue as a step function. ``t``: distinct event times (ns, sorted); ``depth[i]``: ops
    queued and unfinished right after ``t[i]``; ``horizon[i]``: latest GPU end (ns) of the ops queued by
    ``t[i]`` (so ``lead_ns = max(0, horizon - t)``). Before ``t[0]`` the queue is empty."""

    t: np.ndarray
    depth: np.ndarray
    horizon: np.ndarray

    @classmethod
    def build(cls, enqueue_ns: np.ndarray, end_ns: np.ndarray, lead: bool = True) -> LaneQueue:
        """The queue of ops that join at ``enqueue_ns`` and leave at ``end_ns`` (same length, any order).
        ``lead=False`` leaves ``horizon`` empty (depth only: a third less memory for a long run)."""
        q = np.asarray(enqueue_ns, dtype=np.int64)
        e = np.maximum(np.asarray(end_ns, dtype=np.int64), q)
        n = len(q)
        times = np.concatenate([q, e])
        order = np.argsort(times, kind="stable")
        times = times[order]
        joins = order < n  # each op joins once and leaves once
        depth = np.cumsum(np.where(joins, 1, -1).astype(np.int8), dtype=np.int32)
        last = np.flatnonzero(np.append(times[1:] != times[:-1], True)) if len(times) else np.zeros(0, np.int64)
        if not lead:
            return cls(times[last], depth[last], np.zeros(0, np.int64))
        ends = np.where(joins, e[np.where(joins, order, 0)], _NEG)
        horizon = np.maximum.accumulate(ends) if len(ends) else ends
        return cls(times[last], depth[last], horizon[last])

    def __len__(self) -> int:
        return len(self.t)

    def at(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(depth, lead_ns) at each time in ``t``."""
        t = np.asarray(t, dtype=np.int64)
        i = np.searchsorted(self.t, t, side="right") - 1
        ok = i >= 0
        j = np.maximum(i, 0)
        depth = np.where(ok, self.depth[j] if len(self.t) else 0, 0)
        known = len(self.horizon) > 0  # built with lead=False: depth only
        lead = np.where(ok & known, np.maximum(0, (self.horizon[j] if known else 0) - t), 0)
        return depth.astype(np.int64), lead.astype(np.int64)

    def view(self, t0: int, t1: int, buckets: int) -> tuple[np.ndarray, np.ndarray]:
        """Max depth and max lead (ns) in each of ``buckets`` equal slices of [t0, t1)."""
        buckets = max(1, int(buckets))
        edges = t0 + (np.arange(buckets + 1, dtype=np.float64) * ((t1 - t0) / buckets)).astype(np.int64)
        edges[-1] = t1
        depth0, lead0 = self.at(edges[:-1])
        i0 = int(np.searchsorted(self.t, t0, side="right"))
        i1 = int(np.searchsorted(self.t, t1, side="left"))
        if i1 <= i0:
            return depth0, lead0
        t = self.t[i0:i1]
        first = np.searchsorted(t, edges[:-1], side="right")  # events strictly inside each slice
        stop = np.searchsorted(t, edges[1:], side="left")
        has = stop > first
        if has.any():
            dmax = _max_in(self.depth[i0:i1], first[has], stop[has])
            lmax = _max_in(self.horizon[i0:i1] - t, first[has], stop[has])
            depth0[has] = np.maximum(depth0[has], dmax)
            lead0[has] = np.maximum(lead0[has], lmax)
        return depth0, lead0


def _max_in(values: np.ndarray, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Max of ``values[starts[k]:stops[k]]`` for non-empty, ordered, non-overlapping ranges."""
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2], bounds[1::2] = starts, stops
    keep = bounds < len(values)  # only the last stop can be len(values): its range runs to the end
    reduced = np.maximum.reduceat(values, bounds[keep])
    return reduced[(np.cumsum(keep) - 1)[0::2]]


def windowed_median(queue: LaneQueue, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Time-weighted median depth of ``queue`` in each window ``[a[i], b[i])``; NaN for an empty window.
    The median is the smallest depth d such that the depth is at most d for at least half the window.

    No sort: each window's time is binned by depth over the window's own depth range, which is at most
    its event count wide, so the bins in all number at most the events plus the windows."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    out = np.full(len(a), np.nan)
    if not len(a):
        return out
    # pieces: each window cut at the event times inside it; a piece starts at ps with depth pdepth
    lo = np.searchsorted(queue.t, a, side="right")
    counts = np.maximum(np.searchsorted(queue.t, b, side="left") - lo, 0) + 1
    first_piece = np.cumsum(counts) - counts
    win = np.repeat(np.arange(len(a)), counts)
    ev = np.arange(len(win)) - first_piece[win] + lo[win] - 1  # the event that opens each later piece
    ps = queue.t[np.maximum(ev, 0)] if len(queue.t) else np.zeros(len(win), np.int64)
    pdepth = queue.depth[np.maximum(ev, 0)].astype(np.int64) if len(queue.t) else np.zeros(len(win), np.int64)
    ps[first_piece] = a
    pdepth[first_piece] = queue.at(a)[0]
    pe = np.empty_like(ps)
    pe[:-1] = ps[1:]
    pe[first_piece + counts - 1] = b
    length = np.maximum(pe - ps, 0).astype(np.float64)  # whole ns: float64 sums stay exact below 2**53
    total = np.bincount(win, weights=length, minlength=len(a))
    dmin = np.minimum.reduceat(pdepth, first_piece)
    width = np.maximum.reduceat(pdepth, first_piece) - dmin + 1
    base = np.cumsum(width) - width
    cum = np.cumsum(np.bincount(base[win] + pdepth - dmin[win], weights=length, minlength=int(width.sum())))
    before = np.concatenate(([0.0], cum))[base]
    at = np.searchsorted(cum, before + total / 2, side="left")  # first bin where half the window is reached
    ok = total > 0
    out[ok] = (at - base + dmin)[ok]
    return out


def _by_enqueue(enqueue_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ops in enqueue order (stable): their enqueue times, and their ends no earlier than those (a new
    array). Ops already in that order (as launched, the usual) are not sorted: run-long arrays are fresh
    memory the kernel must fault in, each one fewer saves its cost."""
    if len(enqueue_ns) > 1 and not (enqueue_ns[1:] >= enqueue_ns[:-1]).all():
        order = np.argsort(enqueue_ns, kind="stable")
        enqueue_ns, ends = enqueue_ns[order], end_ns[order]
        return enqueue_ns, np.maximum(ends, enqueue_ns, out=ends)
    return enqueue_ns, np.maximum(end_ns, enqueue_ns)


def median_depth(enqueue_ns: np.ndarray, end_ns: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`windowed_median` of the queue of ops that join at ``enqueue_ns`` and leave at ``end_ns``, over
    windows ``[a[i], b[i])`` sorted by ``a``, built a group of windows at a time from only the ops that can be
    queued in the group (about CHUNK_OPS): the same answer in memory that does not grow with the run."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    q, e = _by_enqueue(np.asarray(enqueue_ns, dtype=np.int64), np.asarray(end_ns, dtype=np.int64))
    reach = np.maximum.accumulate(e) if len(e) else e
    first = np.searchsorted(reach, a, side="right")  # every op before it has left by the window's start
    stop = np.searchsorted(q, b, side="left")  # every op from it on joins at or after the window's end
    out = np.full(len(a), np.nan)
    i = 0
    while i < len(a):
        k = max(int(np.searchsorted(stop, first[i] + CHUNK_OPS, side="right")), i + 1)
        lo, hi = int(first[i]), max(int(stop[i:k].max()), int(first[i]))
        out[i:k] = windowed_median(LaneQueue.build(q[lo:hi], e[lo:hi], lead=False), a[i:k], b[i:k])
        i = k
    return out
