"""Critical path per step: what each moment of a step waited on, walked back through the replayed graph.

From the event that ends a step window, the walk follows the binding edge of each node back to the
window's start: a GPU op started when the previous op on its stream ended (GPU time, by the op's class),
when its launch call issued it (launch latency), or when an op on another stream ended; a host node started
after the host's own work since the previous node (host), or after a wait ended; a wait ended when the GPU
op it waited for ended (the wake-up is sync time) or after its own call time (sync). Runs of GPU ops bound
by their stream and runs of host nodes inside an epoch are crossed in one jump (prefix sums), and all steps
walk together, one jump per round, so a step costs a few array operations however many ops it holds.

The parts of each step add up to its window: host work, launch latency, GPU compute, copies,
communication, sync (waits' own time and wake-ups) and other (before the first node the graph knows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from webapp.analysis.causal.graph import COMM, COMPUTE, COPY, Graph
from webapp.analysis.causal.replay import Replayed
from webapp.analysis.causal.segs import NEG, starts_of, take
from webapp.analysis.causal.stepmap import StepMap
from webapp.analysis.context import RunData

PARTS = ("host", "launch", "compute", "copy", "comm", "sync", "other")
"""Critical-path parts, in the column order of :func:`critical_parts`."""
HOST, LAUNCH, COMPUTE_P, COPY_P, COMM_P, SYNC, OTHER = range(7)
_CLASS_PART = {COMPUTE: COMPUTE_P, COPY: COPY_P, COMM: COMM_P}
MAX_ROUNDS = 100_000


class _Acc:
    """Critical-path ns per (window, part), and, when asked for, the path's segments: (window, lane, part,
    start, end) on the axis, one per jump of the walk."""

    def __init__(self, n: int, host_lane: np.ndarray, keep: bool) -> None:
        self.parts = np.zeros((n, len(PARTS)), dtype=np.int64)
        self.host_lane = host_lane
        self.segments: list[tuple[np.ndarray, ...]] | None = [] if keep else None


class _Chains:
    """Replayed GPU streams in FIFO order with what bound each op's start."""

    def __init__(self, g: Graph, rep: Replayed) -> None:
        order = np.lexsort((g.g_start, g.g_stream, g.g_rank))
        self.order = order
        self.pos = np.empty(len(order), dtype=np.int64)
        self.pos[order] = np.arange(len(order))
        key = g.g_rank[order].astype(np.int64) * (int(g.g_stream.max()) + 1 if len(order) else 1) + g.g_stream[order]
        first = starts_of(key)
        rs, re = rep.g_start[order], rep.g_end[order]
        prev_end = np.where(first, NEG, np.roll(re, 1))
        by_stream = ~first & (rs <= prev_end + g.g_bubble[order])
        # a run of ops each started by the previous one's end: its head is the first op started otherwise
        idx = np.where(by_stream, 0, np.arange(len(order)))
        self.head = np.maximum.accumulate(idx) if len(idx) else idx
        part = np.array([_CLASS_PART[int(c)] for c in range(3)])[g.g_class[order]] if len(order) else np.zeros(0, int)
        self.part = part
        gap_next = np.where(np.roll(by_stream, -1), np.roll(rs, -1) - re, 0)  # bubble before the next op
        step = re - rs + np.maximum(gap_next, 0)
        self.cum = np.zeros((3, len(order) + 1), dtype=np.int64)
        for p_i, p in enumerate((COMPUTE_P, COPY_P, COMM_P)):
            np.cumsum(np.where(part == p, step, 0), out=self.cum[p_i, 1:])
        self.rs, self.re = rs, re
        launch = g.g_launch[order]
        linked = launch >= 0
        ready = np.where(linked, take(rep.h_start, launch, 0) + g.g_latency[order], NEG)
        cross = g.g_cross[order]
        cross_ready = np.where(cross >= 0, rep.g_end[np.maximum(cross, 0)] + g.g_cross_lat[order], NEG)
        self.by_cross = (cross >= 0) & (cross_ready >= ready)
        self.by_launch = linked & ~self.by_cross
        self.launch = launch
        self.cross = cross
        self.lane = g.g_stream[order]


SEGMENT_COLUMNS = {
    "rank": "rank",
    "lane": "index into Trace.lanes",
    "part": "one of PARTS",
    "start_ns": "start, ns on the run clock",
    "end_ns": "end, ns on the run clock",
}


def critical_parts(rd: RunData, g: Graph, rep: Replayed, sm: StepMap) -> np.ndarray:
    """Per step window (aligned with rd.win): ns on the critical path in each of PARTS, shape (windows, 7)."""
    return _walk(rd, g, rep, sm, keep=False).parts


def critical_path(rd: RunData, g: Graph, rep: Replayed, sm: StepMap) -> tuple[np.ndarray, pd.DataFrame]:
    """:func:`critical_parts` and the path itself: a frame of SEGMENT_COLUMNS, one row per stretch of the
    path on one lane (a run of GPU ops, host work between two waits, a launch or a wake-up), by start."""
    acc = _walk(rd, g, rep, sm, keep=True)
    segs = acc.segments or []
    cols = [np.concatenate([seg[i] for seg in segs]) if segs else np.zeros(0, np.int64) for i in range(5)]
    win, lane, part, start, end = cols
    keep = (end > start) & (lane >= 0)
    win, lane, part, start, end = win[keep], lane[keep], part[keep], start[keep], end[keep]
    rank = rd.win_rank[win] if len(win) else win
    frame = pd.DataFrame(
        {
            "rank": rank.astype(np.int64),
            "lane": lane.astype(np.int64),
            "part": pd.Categorical.from_codes(part.astype(np.int64), categories=pd.Index(list(PARTS))),
            "start_ns": rd.tb.from_axis(rank, start),
            "end_ns": rd.tb.from_axis(rank, end),
        }
    )
    return acc.parts, frame.sort_values(["start_ns", "lane"], kind="stable").reset_index(drop=True)


def _walk(rd: RunData, g: Graph, rep: Replayed, sm: StepMap, keep: bool) -> _Acc:
    n = len(rd.win)
    host_lane = np.asarray(rd.trace.intervals["lane"], dtype=np.int64)[g.h_row]
    acc = _Acc(n, host_lane, keep)
    if not n or (not g.n_host and not g.n_gpu):
        return acc
    ch = _Chains(g, rep)
    rel_first = starts_of(g.h_epoch) if g.n_host else np.zeros(0, dtype=bool)
    epoch_head = np.maximum.accumulate(np.where(rel_first, np.arange(g.n_host), 0)) if g.n_host else rel_first
    new_rank = starts_of(g.h_rank) if g.n_host else rel_first
    wait_bound = np.zeros(g.n_host, dtype=bool)
    t = g.w_target
    has_t = g.h_wait & (t >= 0)
    wait_bound[has_t] = rep.g_end[t[has_t]] + g.w_wake[has_t] >= rep.h_start[has_t] + g.w_min[has_t]

    lo = rd.win.starts.astype(np.int64)
    hi_meas = rd.win.ends.astype(np.int64)
    lo_rep = sm.warp(rep, lo, rd.win_rank)
    hi_rep = sm.warp(rep, hi_meas, rd.win_rank)
    # start each walk at the event the window's end is tied to: the GPU op that opens the next window (any
    # class: a copy may open it), else the latest event before the end
    i = np.searchsorted(sm.meas, hi_meas, side="right") - 1
    ok = (i >= 0) & (sm.rank[np.maximum(i, 0)] == rd.win_rank)
    ev = sm.order[np.maximum(i, 0)]
    K = g.n_gpu
    if K and sm.on_gpu:
        by_start = np.argsort(g.g_start, kind="stable")
        opener = by_start[np.minimum(np.searchsorted(g.g_start[by_start], hi_meas), K - 1)]
        exact = (g.g_start[opener] == hi_meas) & (g.g_rank[opener] == rd.win_rank)
        ev = np.where(exact, K + opener, ev)  # a GPU op's start, in StepMap's event numbering
        ok |= exact
    H, K = g.n_host, g.n_gpu
    kind = np.full(n, -1, dtype=np.int8)  # 0 host node at its start, 1 GPU op at its start, -1 done
    idx = np.zeros(n, dtype=np.int64)
    at = hi_rep.copy()
    walk = np.flatnonzero(ok)
    e = ev[walk]
    is_ge, is_gs = e < K, (e >= K) & (e < 2 * K)
    is_hs, is_he = (e >= 2 * K) & (e < 2 * K + H), e >= 2 * K + H
    e_ge, e_gs = e, e - K
    e = np.where(is_hs, e - 2 * K, np.where(is_he, e - 2 * K, e))  # host events: H + node for ends, as below
    # host node start: walk from it (host work up to the window's end); GPU op start: the op is still running
    w = walk[is_hs]
    _add(acc, w, HOST, at[w] - rep.h_start[e[is_hs]], at[w], lo_rep[w], acc.host_lane[e[is_hs]])
    at[w] = np.minimum(at[w], rep.h_start[e[is_hs]])
    kind[w], idx[w] = 0, e[is_hs]
    w = walk[is_gs]
    p = ch.pos[e_gs[is_gs]]
    _add(acc, w, ch.part[p], at[w] - ch.rs[p], at[w], lo_rep[w], ch.lane[p])
    at[w] = np.minimum(at[w], ch.rs[p])
    kind[w], idx[w] = 1, p
    # host node end: a call's own time is host; a wait's end is walked as the wait
    node = e[is_he] - H
    w = walk[is_he]
    _add(acc, w, OTHER, at[w] - rep.h_end[node], at[w], lo_rep[w])
    at[w] = np.minimum(at[w], rep.h_end[node])
    kind[w], idx[w] = 2, node  # 2: a host node at its end
    # GPU op end: its own time, then from its start
    op = e_ge[is_ge]
    w = walk[is_ge]
    _add(acc, w, OTHER, at[w] - rep.g_end[op], at[w], lo_rep[w])
    at[w] = np.minimum(at[w], rep.g_end[op])
    p = ch.pos[op]
    _add(acc, w, ch.part[p], at[w] - ch.rs[p], at[w], lo_rep[w], ch.lane[p])
    at[w] = np.minimum(at[w], ch.rs[p])
    kind[w], idx[w] = 1, p
    # walks that found no event: the whole window is other
    nw = np.flatnonzero(~ok)
    acc.parts[nw, OTHER] += np.maximum(hi_rep[nw] - lo_rep[nw], 0)
    kind[at <= lo_rep] = -1

    for _ in range(MAX_ROUNDS):
        live = np.flatnonzero(kind >= 0)
        if not len(live):
            break
        _gpu_round(live[kind[live] == 1], ch, g, rep, acc, kind, idx, at, lo_rep)
        _host_round(live[kind[live] == 0], g, rep, acc, kind, idx, at, lo_rep, epoch_head, rel_first, new_rank)
        _wait_round(live[kind[live] == 2], ch, g, rep, acc, kind, idx, at, lo_rep, wait_bound)
        kind[(kind >= 0) & (at <= lo_rep)] = -1
    return acc


def _add(
    acc: _Acc,
    w: np.ndarray,
    part: np.ndarray | int,
    length: np.ndarray,
    end: np.ndarray,
    lo: np.ndarray,
    lane: np.ndarray | int = -1,
) -> None:
    """Add the part of ``[end - length, end)`` after ``lo`` to each walk's ``part`` (and, when segments are
    kept, the stretch on ``lane``)."""
    if not len(w):
        return
    start = np.maximum(end - np.maximum(length, 0), lo)
    parts = np.broadcast_to(part, w.shape)
    np.add.at(acc.parts, (w, parts), np.maximum(end - start, 0))
    if acc.segments is not None:
        acc.segments.append((w, np.broadcast_to(lane, w.shape), parts, start, np.maximum(end, start)))


def _gpu_round(
    w: np.ndarray,
    ch: _Chains,
    g: Graph,
    rep: Replayed,
    acc: _Acc,
    kind: np.ndarray,
    idx: np.ndarray,
    at: np.ndarray,
    lo: np.ndarray,
) -> None:
    if not len(w):
        return
    p = idx[w]
    head = ch.head[p]
    u = _last_at_or_before(ch.rs, head, p, lo[w])  # the run's op under the window's start (head - 1: none)
    inside = u < head
    full_from = np.where(inside, head, u + 1)
    for p_i, part in enumerate((COMPUTE_P, COPY_P, COMM_P)):
        np.add.at(acc.parts, (w, np.full(len(w), part)), ch.cum[p_i, p] - ch.cum[p_i, full_from])
    if acc.segments is not None:  # the run as one stretch of its stream
        acc.segments.append((w, ch.lane[p], ch.part[p], np.maximum(ch.rs[full_from], lo[w]), at[w]))
    split = ~inside
    sw, su = w[split], u[split]
    nxt_start = ch.rs[np.minimum(su + 1, len(ch.rs) - 1)]
    np.add.at(acc.parts, (sw, ch.part[su]), np.maximum(nxt_start - lo[sw], 0))
    at[sw] = lo[sw]
    kind[sw] = -1
    w, h = w[inside], head[inside]
    at[w] = ch.rs[h]
    if not len(w):
        return
    # what started the head: its launch, an op on another stream, or nothing the graph knows
    by_launch, by_cross = ch.by_launch[h], ch.by_cross[h]
    lw, lh = w[by_launch], h[by_launch]
    node = ch.launch[lh]
    _add(acc, lw, LAUNCH, at[lw] - rep.h_start[node], at[lw], lo[lw], ch.lane[lh])
    at[lw] = np.minimum(at[lw], rep.h_start[node])
    kind[lw], idx[lw] = 0, node
    cw, chh = w[by_cross], h[by_cross]
    src = ch.pos[ch.cross[chh]]
    _add(acc, cw, ch.part[chh], at[cw] - ch.re[src], at[cw], lo[cw], ch.lane[chh])
    at[cw] = np.minimum(at[cw], ch.re[src])
    _add(acc, cw, ch.part[src], at[cw] - ch.rs[src], at[cw], lo[cw], ch.lane[src])
    at[cw] = np.minimum(at[cw], ch.rs[src])
    idx[cw] = src
    ow = w[~by_launch & ~by_cross]
    _add(acc, ow, OTHER, at[ow] - lo[ow], at[ow], lo[ow], ch.lane[h[~by_launch & ~by_cross]])
    kind[ow] = -1


def _host_round(
    w: np.ndarray,
    g: Graph,
    rep: Replayed,
    acc: _Acc,
    kind: np.ndarray,
    idx: np.ndarray,
    at: np.ndarray,
    lo: np.ndarray,
    epoch_head: np.ndarray,
    first: np.ndarray,
    new_rank: np.ndarray,
) -> None:
    if not len(w):
        return
    j = idx[w]
    f = epoch_head[j]
    # back through the epoch: host work start to start
    _add(acc, w, HOST, at[w] - rep.h_start[f], at[w], lo[w], acc.host_lane[f])
    at[w] = np.minimum(at[w], rep.h_start[f])
    # before the epoch: the wait that opened it (host work since it ended), or the rank's start
    opener = new_rank[f]
    ow = w[opener]
    _add(acc, ow, OTHER, at[ow] - lo[ow], at[ow], lo[ow])
    kind[ow] = -1
    ww, wf = w[~opener], f[~opener] - 1
    _add(acc, ww, HOST, at[ww] - rep.h_end[wf], at[ww], lo[ww], acc.host_lane[wf])
    at[ww] = np.minimum(at[ww], rep.h_end[wf])
    kind[ww], idx[ww] = 2, wf


def _wait_round(
    w: np.ndarray,
    ch: _Chains,
    g: Graph,
    rep: Replayed,
    acc: _Acc,
    kind: np.ndarray,
    idx: np.ndarray,
    at: np.ndarray,
    lo: np.ndarray,
    wait_bound: np.ndarray,
) -> None:
    """Walks standing at a host node's end: a wait released by its GPU op goes to that op; any other node's
    own time is host (a call) or sync (a wait that did not wait for the GPU)."""
    if not len(w):
        return
    j = idx[w]
    bound = wait_bound[j]
    bw, bj = w[bound], j[bound]
    t = ch.pos[g.w_target[bj]]
    _add(acc, bw, SYNC, at[bw] - ch.re[t], at[bw], lo[bw], acc.host_lane[bj])
    at[bw] = np.minimum(at[bw], ch.re[t])
    _add(acc, bw, ch.part[t], at[bw] - ch.rs[t], at[bw], lo[bw], ch.lane[t])
    at[bw] = np.minimum(at[bw], ch.rs[t])
    kind[bw], idx[bw] = 1, t
    sw, sj = w[~bound], j[~bound]
    part = np.where(g.h_wait[sj], SYNC, HOST)
    _add(acc, sw, part, at[sw] - rep.h_start[sj], at[sw], lo[sw], acc.host_lane[sj])
    at[sw] = np.minimum(at[sw], rep.h_start[sj])
    kind[sw], idx[sw] = 0, sj


def _last_at_or_before(t: np.ndarray, lo_idx: np.ndarray, hi_idx: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Per query, the last index in ``[lo_idx, hi_idx]`` with ``t <= value`` (``t`` increasing there);
    ``lo_idx - 1`` where there is none. A binary search run for all queries at once."""
    a = lo_idx.copy()
    b = hi_idx.copy()
    none = t[lo_idx] > value
    while True:
        todo = a < b
        if not todo.any():
            break
        mid = (a + b + 1) // 2
        le = t[mid] <= value
        a = np.where(todo & le, mid, a)
        b = np.where(todo & ~le, mid - 1, b)
    return np.where(none, lo_idx - 1, a)
