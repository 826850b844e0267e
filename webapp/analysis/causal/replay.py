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
    epoch: np.ndarray  # epoch of the launch (-1: none) per position
    seg: np.ndarray  # (stream, launch epoch) segment per position, -1 before the stream's first launch
    seg_cummax: np.ndarray  # running max of issue_term inside the segment, per position
    seg_max: np.ndarray  # per segment: the max of its issue terms
    seg_prev: np.ndarray  # per segment: the previous segment of the same stream (-1: none)
    seg_epoch: np.ndarray  # per segment: its epoch


def _streams(g: Graph, rel: np.ndarray) -> _Streams:
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
    step = np.where(new_stream, 0, g.g_bubble[order]) + d
    q = seg_cumsum(step, stream_key)
    base = q - d
    fixed = g.g_fixed_ready[order]
    static = seg_cummax(np.where(fixed > NEG, fixed - base, NEG), stream_key)
    launch = g.g_launch[order]
    linked = launch >= 0
    epoch = take(g.h_epoch, launch, -1)
    issue = np.where(linked, take(rel, launch, 0) + g.g_latency[order] - base, NEG)
    # the launch epoch along each stream (carried over unlinked ops); an op launched in an earlier epoch
    # than one before it on its stream is treated as launched with it
    carried = seg_cummax(np.where(linked, epoch, -1), stream_key)
    behind = linked & (epoch < carried)
    if behind.any():
        issue = np.where(behind, NEG, issue)
        static = seg_cummax(np.maximum(static, np.where(behind, g.g_start[order] - base, NEG)), stream_key)
    seg_key = np.where(carried >= 0, stream_key * (int(carried.max()) + 2 if k else 1) + carried, -1)
    has = seg_key >= 0
    heads = has & starts_of(seg_key)
    seg = np.where(has, np.cumsum(heads) - 1, -1)
    seg_run = seg_cummax(issue, np.where(has, seg, -1 - stream_key))
    n_seg = int(heads.sum())
    seg_max = np.full(n_seg, NEG, dtype=np.int64)
    if n_seg:
        np.maximum.at(seg_max, seg[has], issue[has])
    first_pos = np.flatnonzero(heads)
    seg_stream = stream_key[first_pos]
    seg_prev = np.where(np.concatenate(([False], seg_stream[1:] == seg_stream[:-1])), np.arange(n_seg) - 1, -1)
    return _Streams(
        order=order,
        pos_of=pos_of,
        stream_key=stream_key,
        q=q,
        d=d,
        static=static,
        issue_term=issue,
        epoch=epoch,
        seg=seg,
        seg_cummax=seg_run,
        seg_max=seg_max,
        seg_prev=seg_prev,
        seg_epoch=carried[first_pos],
    )


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
    """Set each epoch's start (``base``), the cross-stream terms and each wait's end, epoch by epoch."""
    n_epochs = len(base)
    q, static, seg, seg_run = st.q.tolist(), st.static.tolist(), st.seg.tolist(), st.seg_cummax.tolist()
    pos_epoch, stream_key = st.epoch.tolist(), st.stream_key.tolist()
    carried = np.full(len(st.order), -1, dtype=np.int64)
    if len(seg):
        has = st.seg >= 0
        carried[has] = st.seg_epoch[st.seg[has]]
    carried_l = carried.tolist()
    seg_max, seg_prev = st.seg_max.tolist(), st.seg_prev.tolist()
    seg_run_max = [NEG] * len(seg_max)
    base_l = base.tolist()
    cross_pos: dict[int, list[int]] = {}
    cross_max: dict[int, list[int]] = {}

    def end_of(p: int) -> int:
        best = static[p]
        s = seg[p]
        if s >= 0:
            cur = base_l[carried_l[p]] + seg_run[p]
            prev = seg_prev[s]
            before = seg_run_max[prev] if prev >= 0 else NEG
            best = max(best, cur, before)
        key = stream_key[p]
        plist = cross_pos.get(key)
        if plist:
            i = bisect.bisect_right(plist, p)
            if i:
                best = max(best, cross_max[key][i - 1])
        return q[p] + best

    # cross-stream edges in the order their destinations were launched (a source is launched no later than
    # its destination, so its own edge is done first)
    dst_pos = np.flatnonzero(g.g_cross[st.order] >= 0)
    dst_epoch = st.epoch[dst_pos]
    keep = dst_epoch >= 0
    dst_pos, dst_epoch = dst_pos[keep], dst_epoch[keep]
    dst_launch = g.g_launch[st.order[dst_pos]]
    by_epoch = np.lexsort((dst_pos, g.h_start[dst_launch] if len(dst_launch) else dst_pos, dst_epoch))
    dst_pos, dst_epoch = dst_pos[by_epoch], dst_epoch[by_epoch]
    src_pos = st.pos_of[g.g_cross[st.order[dst_pos]]].tolist()
    lat = (g.g_cross_lat[st.order[dst_pos]] - (st.q[dst_pos] - st.d[dst_pos])).tolist()
    cross_bounds = np.searchsorted(dst_epoch, np.arange(n_epochs + 1)).tolist()
    dst_l = dst_pos.tolist()
    # segments by epoch, to close each epoch's segments once its start is known
    seg_order = np.argsort(st.seg_epoch, kind="stable")
    seg_bounds = np.searchsorted(st.seg_epoch[seg_order], np.arange(n_epochs + 1)).tolist()
    seg_order_l = seg_order.tolist()
    e_wait, e_rank = g.e_wait.tolist(), g.e_rank.tolist()
    w_target, w_min, w_wake = g.w_target.tolist(), g.w_min.tolist(), g.w_wake.tolist()
    rel_l = rel.tolist()
    pos_of = st.pos_of.tolist()
    wait_ends: dict[int, int] = {}
    for e in range(n_epochs):
        b = base_l[e]
        for c in range(cross_bounds[e], cross_bounds[e + 1]):
            p = dst_l[c]
            x = end_of(src_pos[c]) + lat[c]
            cross_term[p] = x
            key = stream_key[p]
            plist = cross_pos.setdefault(key, [])
            mlist = cross_max.setdefault(key, [])
            plist.append(p)
            mlist.append(max(x, mlist[-1]) if mlist else x)
        w = e_wait[e]
        if w >= 0:
            end = b + rel_l[w] + w_min[w]
            t = w_target[w]
            if t >= 0:
                end = max(end, end_of(pos_of[t]) + w_wake[w])
            wait_ends[w] = end
            if e + 1 < n_epochs and e_rank[e + 1] == e_rank[e]:
                base_l[e + 1] = end
        for i in range(seg_bounds[e], seg_bounds[e + 1]):
            s = seg_order_l[i]
            prev = seg_prev[s]
            seg_run_max[s] = max(seg_run_max[prev] if prev >= 0 else NEG, b + seg_max[s])
    del pos_epoch
    base[:] = base_l
    if wait_ends:
        idx = np.fromiter(wait_ends.keys(), dtype=np.int64, count=len(wait_ends))
        wait_end[idx] = np.fromiter(wait_ends.values(), dtype=np.int64, count=len(wait_ends))
