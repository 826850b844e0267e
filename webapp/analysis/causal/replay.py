"""Replay: a discrete-event re-timing of a run's dependency graph (webapp.analysis.causal.graph).

The host's issuing sequence moves only at waits: inside an epoch every host node keeps its offset from the
epoch's start, so the whole run is fixed by one number per epoch, the time its opening wait ended. GPU
streams are max-plus chains: an op ends at ``Q_k + max over i <= k of (earliest start_i - (Q_i - D_i))``
with ``Q`` the stream's running sum of bubbles and run times ``D``. Each op's earliest start is its launch
(epoch start + host offset + launch latency), a fixed time, or a cross-stream op's end. The replay walks
the epochs in order, asks each wait's stream when its op ends (a few array lookups), and sets the next
epoch's start; then every time in the run follows from vectorized scans. Unchanged, the graph reproduces
the measured times (the graph's parameters are measured so that it does).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from webapp.analysis.causal.graph import Graph
from webapp.analysis.causal.segs import NEG, seg_cummax, seg_cumsum, starts_of, take


@dataclass(frozen=True)
class Replayed:
    """Replayed times (axis ns), aligned with the graph's host nodes, GPU ops and epochs."""

    h_start: np.ndarray
    h_end: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    e_base: np.ndarray


@dataclass(frozen=True)
class _Streams:
    """GPU ops in stream order (``pos``), with the static parts of the max-plus chains."""

    order: np.ndarray  # op index at each position
    pos_of: np.ndarray  # position of each op
    stream_key: np.ndarray  # (rank, stream) segment id per position
    q: np.ndarray  # running sum of bubble + run time per position
    d: np.ndarray
    static: np.ndarray  # prefix max of fixed-start terms per position
    issue_term: np.ndarray  # host offset + latency - (Q - D) per position (NEG: not launched by the issuer)
    launch: np.ndarray  # the node each position follows (its launch or anchor; -1: none)
    epoch: np.ndarray  # epoch of the launch (-1: none) per position
    seg: np.ndarray  # (stream, launch epoch) segment per position, -1 before the stream's first launch
    seg_cummax: np.ndarray  # running max of issue_term inside the segment, per position
    seg_max: np.ndarray  # per segment: the max of its issue terms
    seg_prev: np.ndarray  # per segment: the previous segment of the same stream (-1: none)
    seg_epoch: np.ndarray  # per segment: its epoch


@dataclass(frozen=True)
class _Layout:
    """What of the streams does not depend on host times: kept across replays of graphs that share their GPU
    arrays (most fixes change only host parameters)."""

    key: tuple[np.ndarray, ...]
    order: np.ndarray
    pos_of: np.ndarray
    stream_key: np.ndarray
    q: np.ndarray
    d: np.ndarray
    base: np.ndarray
    static: np.ndarray
    launch: np.ndarray  # the node each op follows, by position: its launch, or its anchor (-1: none)
    linked: np.ndarray
    epoch: np.ndarray
    seg: np.ndarray
    seg_heads: np.ndarray
    seg_prev: np.ndarray
    seg_epoch: np.ndarray


_LAYOUTS: list[_Layout] = []
_LAYOUT_CACHE = 4


def _layout(g: Graph) -> _Layout:
    key = (g.g_start, g.g_stream, g.g_rank, g.g_dur, g.g_bubble, g.g_fixed_ready, g.g_launch, g.g_anchor, g.h_epoch)
    for lay in _LAYOUTS:
        if all(a is b for a, b in zip(lay.key, key, strict=True)):
            return lay
    order = np.lexsort((g.g_start, g.g_stream, g.g_rank))
    k = len(order)
    pos_of = np.empty(k, dtype=np.int64)
    pos_of[order] = np.arange(k)
    rank, stream = g.g_rank[order], g.g_stream[order]
    new_stream = np.ones(k, dtype=bool)
    if k > 1:
        new_stream[1:] = (rank[1:] != rank[:-1]) | (stream[1:] != stream[:-1])
    stream_key = np.cumsum(new_stream) - 1
    d = g.g_dur[order]
    q = seg_cumsum(np.where(new_stream, 0, g.g_bubble[order]) + d, stream_key)
    base = q - d
    # an op no issuing node launched follows its anchor (Graph.g_anchor) as a launched op follows its launch
    anchored = (g.g_launch < 0) & (g.g_anchor >= 0)
    fixed = np.where(anchored, NEG, g.g_fixed_ready)[order]
    launch = np.where(anchored, g.g_anchor, g.g_launch)[order]
    linked = launch >= 0
    epoch = take(g.h_epoch, launch, -1)
    # the launch epoch along each stream (carried over unlinked ops); an op launched in an earlier epoch
    # than one before it on its stream keeps its measured start
    carried = seg_cummax(np.where(linked, epoch, -1), stream_key)
    behind = linked & (epoch < carried)
    fixed = np.where(behind, g.g_start[order], fixed)
    linked &= ~behind
    static = seg_cummax(np.where(fixed > NEG, fixed - base, NEG), stream_key)
    seg_key = np.where(carried >= 0, stream_key * (int(carried.max()) + 2 if k else 1) + carried, -1)
    has = seg_key >= 0
    heads = has & starts_of(seg_key)
    seg = np.where(has, np.cumsum(heads) - 1, -1)
    first_pos = np.flatnonzero(heads)
    seg_stream = stream_key[first_pos]
    n_seg = len(first_pos)
    seg_prev = np.where(np.concatenate(([False], seg_stream[1:] == seg_stream[:-1])), np.arange(n_seg) - 1, -1)
    lay = _Layout(
        key,
        order,
        pos_of,
        stream_key,
        q,
        d,
        base,
        static,
        launch,
        linked,
        epoch,
        seg,
        first_pos,
        seg_prev,
        carried[first_pos],
    )
    _LAYOUTS.insert(0, lay)
    del _LAYOUTS[_LAYOUT_CACHE:]
    return lay


def _streams(g: Graph, rel: np.ndarray) -> _Streams:
    lay = _layout(g)
    launch = lay.launch
    anchored = lay.linked & (g.g_launch[lay.order] < 0)  # its measured distance from its anchor
    latency = np.where(anchored, g.g_start[lay.order] - take(g.h_start, launch, 0), g.g_latency[lay.order])
    issue = np.where(lay.linked, take(rel, launch, 0) + latency - lay.base, NEG)
    has = lay.seg >= 0
    seg_run = seg_cummax(issue, np.where(has, lay.seg, -1 - lay.stream_key))
    # a segment's max is the running max at its last position: segments are contiguous, and each runs to the
    # next segment's head on its stream or to its stream's end
    heads = lay.seg_heads
    seg_max = np.zeros(0, dtype=np.int64)
    if len(heads):
        same_stream = np.append(lay.stream_key[heads[1:]] == lay.stream_key[heads[:-1]], False)
        stream_end = _stream_ends(lay.stream_key)[lay.stream_key[heads]]
        seg_max = seg_run[np.where(same_stream, np.append(heads[1:], 0), stream_end) - 1]
    return _Streams(
        order=lay.order,
        pos_of=lay.pos_of,
        stream_key=lay.stream_key,
        q=lay.q,
        d=lay.d,
        static=lay.static,
        issue_term=issue,
        launch=launch,
        epoch=np.where(lay.linked, lay.epoch, -1),
        seg=lay.seg,
        seg_cummax=seg_run,
        seg_max=seg_max,
        seg_prev=lay.seg_prev,
        seg_epoch=lay.seg_epoch,
    )


def _stream_ends(stream_key: np.ndarray) -> np.ndarray:
    """One past the last position of each stream."""
    if not len(stream_key):
        return np.zeros(0, dtype=np.int64)
    return np.searchsorted(stream_key, np.arange(int(stream_key[-1]) + 1), side="right")


def replay(g: Graph) -> Replayed:
    """Re-time the whole graph. Unchanged, the result equals the measured times (up to inferred edges)."""
    rel = seg_cumsum(g.h_delta, g.h_epoch)
    st = _streams(g, rel)
    n_epochs = len(g.e_start)
    base = g.e_start.astype(np.int64).copy()
    cross_term = np.full(len(st.order), NEG, dtype=np.int64)
    wait_end = np.full(g.n_host, NEG, dtype=np.int64)
    if n_epochs:
        _walk(g, st, rel, base, cross_term, wait_end)
    term = np.maximum(st.static, cross_term)
    issued = st.epoch >= 0
    term = np.maximum(term, np.where(issued, take(base, st.epoch, 0) + st.issue_term, NEG))
    g_end_pos = st.q + seg_cummax(term, st.stream_key)
    g_end = np.empty_like(g_end_pos)
    g_end[st.order] = g_end_pos
    h_start = base[g.h_epoch] + rel if g.n_host else np.zeros(0, dtype=np.int64)
    h_end = np.where(g.h_wait, wait_end, h_start + (g.h_end - g.h_start))
    return Replayed(h_start=h_start, h_end=h_end, g_start=g_end - g.g_dur, g_end=g_end, e_base=base)


def _walk(
    g: Graph, st: _Streams, rel: np.ndarray, base: np.ndarray, cross_term: np.ndarray, wait_end: np.ndarray
) -> None:
    """Set each epoch's start (``base``), the cross-stream terms and each wait's end, epoch by epoch. Only
    the stream positions a wait or a cross-stream edge asks about are read into Python."""
    n_epochs = len(base)
    # cross-stream edges in the order their destinations were launched (a source is launched no later than
    # its destination, so its own edge is done first)
    dst_pos = np.flatnonzero(g.g_cross[st.order] >= 0)
    dst_epoch = st.epoch[dst_pos]
    keep = dst_epoch >= 0
    dst_pos, dst_epoch = dst_pos[keep], dst_epoch[keep]
    dst_launch = st.launch[dst_pos]
    by_epoch = np.lexsort((dst_pos, g.h_start[dst_launch] if len(dst_launch) else dst_pos, dst_epoch))
    dst_pos, dst_epoch = dst_pos[by_epoch], dst_epoch[by_epoch]
    src_pos = st.pos_of[g.g_cross[st.order[dst_pos]]]
    lat = (g.g_cross_lat[st.order[dst_pos]] - (st.q[dst_pos] - st.d[dst_pos])).tolist()
    cross_bounds = np.searchsorted(dst_epoch, np.arange(n_epochs + 1)).tolist()
    # per epoch: its closing wait's offset, minimum, wake-up and the stream position it waits for
    w = g.e_wait
    has_w = w >= 0
    w_rel = np.where(has_w, take(rel, w, 0) + take(g.w_min, w, 0), 0).tolist()
    target = take(g.w_target, w, -1) if len(w) else w
    t_pos = np.where(target >= 0, take(st.pos_of, target, -1), -1)
    t_wake = take(g.w_wake, w, 0).tolist()
    asked = np.unique(np.concatenate((t_pos[t_pos >= 0], src_pos, dst_pos)))
    look = {int(p): i for i, p in enumerate(asked.tolist())}
    has_seg = st.seg[asked] >= 0 if len(asked) else np.zeros(0, dtype=bool)
    carried = np.where(has_seg, st.seg_epoch[np.maximum(st.seg[asked], 0)] if len(st.seg_epoch) else 0, -1)
    q, static, seg = st.q[asked].tolist(), st.static[asked].tolist(), st.seg[asked].tolist()
    seg_run, carried_l, stream_key = st.seg_cummax[asked].tolist(), carried.tolist(), st.stream_key[asked].tolist()
    seg_max, seg_prev = st.seg_max.tolist(), st.seg_prev.tolist()
    seg_run_max = [NEG] * len(seg_max)
    base_l = base.tolist()
    cross_pos: dict[int, list[int]] = {}
    cross_max: dict[int, list[int]] = {}

    def end_of(p: int) -> int:
        i = look[p]
        best = static[i]
        s = seg[i]
        if s >= 0:
            prev = seg_prev[s]
            best = max(best, base_l[carried_l[i]] + seg_run[i], seg_run_max[prev] if prev >= 0 else NEG)
        plist = cross_pos.get(stream_key[i])
        if plist:
            j = bisect.bisect_right(plist, p)
            if j:
                best = max(best, cross_max[stream_key[i]][j - 1])
        return q[i] + best

    seg_order = np.argsort(st.seg_epoch, kind="stable")
    seg_bounds = np.searchsorted(st.seg_epoch[seg_order], np.arange(n_epochs + 1)).tolist()
    seg_order_l = seg_order.tolist()
    e_wait, e_rank, t_pos_l = w.tolist(), g.e_rank.tolist(), t_pos.tolist()
    dst_l, src_l = dst_pos.tolist(), src_pos.tolist()
    ends: list[int] = []
    for e in range(n_epochs):
        b = base_l[e]
        for c in range(cross_bounds[e], cross_bounds[e + 1]):
            p = dst_l[c]
            x = end_of(src_l[c]) + lat[c]
            cross_term[p] = x
            key = stream_key[look[p]]
            plist = cross_pos.setdefault(key, [])
            mlist = cross_max.setdefault(key, [])
            plist.append(p)
            mlist.append(max(x, mlist[-1]) if mlist else x)
        if e_wait[e] >= 0:
            end = b + w_rel[e]
            tp = t_pos_l[e]
            if tp >= 0:
                end = max(end, end_of(tp) + t_wake[e])
            ends.append(end)
            if e + 1 < n_epochs and e_rank[e + 1] == e_rank[e]:
                base_l[e + 1] = end
        for i in range(seg_bounds[e], seg_bounds[e + 1]):
            s = seg_order_l[i]
            prev = seg_prev[s]
            seg_run_max[s] = max(seg_run_max[prev] if prev >= 0 else NEG, b + seg_max[s])
    base[:] = base_l
    if ends:
        wait_end[w[has_w]] = np.array(ends, dtype=np.int64)
