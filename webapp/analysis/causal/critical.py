"""Critical path per step: what each moment of a step waited on, walked back through the replayed graph.

From the event that ends a step window, the walk follows the binding edge of each node back to the window's
start: a GPU op started when the previous op on its stream ended (GPU time, by the op's class), when its
launch call returned (launch latency; the call's own time is host), or when an op on another stream ended; a
host node started after the host's own work since the previous node (host), or after a wait ended; a wait
ended when the GPU op it waited for ended (the wake-up is sync time) or after its own call time (sync); a GPU
op started by nothing the graph knows came after the op before it on its stream (the gap between is other).
Runs of GPU ops bound by their stream and runs of host nodes inside an epoch are crossed in one jump (prefix
sums), and all steps walk together, one jump per round, so a step costs a few array operations however many
ops it holds.

The parts of each step add up to its window: host work, launch latency, GPU compute, copies,
communication, sync (waits' own time and wake-ups) and other (what the graph has no cause for: before its
first node where the host recorded nothing, a gap before a GPU op that nothing it knows started, or a gap
longer than GAP_HELD_NS between two queued ops of a stream).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from webapp.analysis.causal.graph import COMM, COMPUTE, COPY, LAUNCH_MAX_NS, Graph
from webapp.analysis.causal.replay import Replayed
from webapp.analysis.causal.segs import NEG, starts_of, take
from webapp.analysis.causal.stepmap import StepMap
from webapp.analysis.context import RunData

PARTS = ("host", "launch", "compute", "copy", "comm", "sync", "other")
"""Critical-path parts, in the column order of :func:`critical_path`'s first result."""
HOST, LAUNCH, COMPUTE_P, COPY_P, COMM_P, SYNC, OTHER = range(7)
_CLASS_PART = {COMPUTE: COMPUTE_P, COPY: COPY_P, COMM: COMM_P}
_RUN_PARTS = (COMPUTE_P, COPY_P, COMM_P, OTHER)
"""What a run of GPU ops holds: its ops' classes, and other (the unexplained part of the gaps between them)."""
MAX_ROUNDS = 100_000
GAP_HELD_NS = LAUNCH_MAX_NS
"""A gap between two ops of a run up to this long is held by the op before it (the GPU's own scheduling); a
longer one, which nothing in the trace explains (work outside the trace), is other."""


class _Acc:
    """Critical-path ns per (window, part), and the path's segments: (window, lane, part, start, end) on the
    axis, one per jump of the walk."""

    def __init__(self, n: int, host_lane: np.ndarray) -> None:
        self.parts = np.zeros((n, len(PARTS)), dtype=np.int64)
        self.host_lane = host_lane
        self.segments: list[tuple[np.ndarray, ...]] = []


class _Chains:
    """Replayed GPU streams in FIFO order with what bound each op's start."""

    def __init__(self, g: Graph, rep: Replayed) -> None:
        order = np.lexsort((g.g_start, g.g_stream, g.g_rank))
        self.order = order
        self.pos = np.empty(len(order), dtype=np.int64)
        self.pos[order] = np.arange(len(order))
        key = g.g_rank[order].astype(np.int64) * (int(g.g_stream.max()) + 1 if len(order) else 1) + g.g_stream[order]
        first = starts_of(key)
        self.first = first
        rs, re = rep.g_start[order], rep.g_end[order]
        prev_end = np.where(first, NEG, np.roll(re, 1))
        by_stream = ~first & (rs <= prev_end + g.g_bubble[order])
        # a run of ops each started by the previous one's end: its head is the first op started otherwise
        idx = np.where(by_stream, 0, np.arange(len(order)))
        self.head = np.maximum.accumulate(idx) if len(idx) else idx
        part = np.array([_CLASS_PART[int(c)] for c in range(3)])[g.g_class[order]] if len(order) else np.zeros(0, int)
        self.part = part
        # each op holds the path until the next op of its run starts (its bubble included; an overlap with the
        # next op, where a trace has one, not counted twice), so a run's ops add up to its span; a gap longer than
        # GAP_HELD_NS is other
        cont = np.roll(by_stream, -1) if len(order) else by_stream
        own_end = np.maximum(re, rs)
        gap = np.where(cont, np.roll(rs, -1) - own_end, 0)
        excess = np.where(gap > GAP_HELD_NS, gap, 0)
        self.held_end = own_end + np.where(excess > 0, 0, GAP_HELD_NS)  # the op holds the path up to here at most
        step = np.where(cont, np.roll(rs, -1) - rs, re - rs)
        self.cum = np.zeros((len(_RUN_PARTS), len(order) + 1), dtype=np.int64)
        for p_i, p in enumerate(_RUN_PARTS[:-1]):
            np.cumsum(np.where(part == p, step - excess, 0), out=self.cum[p_i, 1:])
        np.cumsum(excess, out=self.cum[-1, 1:])
        self.rs, self.re = rs, re
        # runs of ops of one part on one stream (a stream's ops in FIFO order) with no unexplained gap between
        # them, for drawing the path
        brk = first | np.append(True, (part[1:] != part[:-1]) | (excess[:-1] > 0)) if len(order) else first
        self.crun = np.cumsum(brk) - 1 if len(order) else first
        self.crun_first = np.flatnonzero(np.diff(self.crun, prepend=-1)) if len(order) else first
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


def critical_path(rd: RunData, g: Graph, rep: Replayed, sm: StepMap) -> tuple[np.ndarray, pd.DataFrame]:
    """Per step window (aligned with rd.win): ns on the critical path in each of PARTS, shape (windows, 7); and
    the path itself: a frame of SEGMENT_COLUMNS, one row per stretch of the path on one lane (a run of GPU
    ops, host work between two waits, a launch or a wake-up), by start."""
    acc = _walk(rd, g, rep, sm)
    segs = acc.segments
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


def _walk(rd: RunData, g: Graph, rep: Replayed, sm: StepMap) -> _Acc:
    n = len(rd.win)
    host_lane = rd.ints("lane", g.h_row)
    acc = _Acc(n, host_lane)
    if not n or (not g.n_host and not g.n_gpu):  # nothing the graph knows: the whole of each step is other
        acc.parts[:, OTHER] = np.maximum(rd.win.ends - rd.win.starts, 0)
        return acc
    walker = _Walker(rd, g, rep, sm, acc)
    for _ in range(MAX_ROUNDS):
        if not walker.round():
            break
    return acc


class _Walker:
    """All steps' walks at once: ``kind`` (0 at a host node's start, 1 at a GPU op's start, 2 at a host
    node's end, -1 done), ``idx`` (the node, or the op's stream position), ``at`` (the time reached) and ``lo``
    (the window's start), one entry per window."""

    def __init__(self, rd: RunData, g: Graph, rep: Replayed, sm: StepMap, acc: _Acc) -> None:
        self.g, self.rep, self.acc = g, rep, acc
        self.host_busy = rd.host  # the host's recorded calls, ops and waits on the axis
        self.ch = ch = _Chains(g, rep)
        first = starts_of(g.h_epoch) if g.n_host else np.zeros(0, dtype=bool)
        self.epoch_head = np.maximum.accumulate(np.where(first, np.arange(g.n_host), 0)) if g.n_host else first
        self.new_rank = starts_of(g.h_rank) if g.n_host else first
        self.wait_bound = np.zeros(g.n_host, dtype=bool)
        t = g.w_target
        has_t = g.h_wait & (t >= 0)
        t_end = rep.g_end[t[has_t]]
        # a wait is on its GPU op's path when the op released it, or ended inside it: a pageable download's
        # call goes on copying on the host after the GPU's copy ends (that tail is the wait's own, sync)
        self.wait_bound[has_t] = (t_end + g.w_wake[has_t] >= rep.h_start[has_t] + g.w_min[has_t]) | (
            (t_end >= rep.h_start[has_t]) & (t_end <= rep.h_end[has_t])
        )
        n = len(rd.win)
        hi_meas = rd.win.ends.astype(np.int64)
        self.lo = sm.warp(rep, rd.win.starts.astype(np.int64), rd.win_rank)
        self.at = sm.warp(rep, hi_meas, rd.win_rank)
        self.kind = np.full(n, -1, dtype=np.int8)
        self.idx = np.zeros(n, dtype=np.int64)
        # start each walk at the event the window's end is tied to: the GPU op that opens the next window (any
        # class: a copy may open it), else the latest event before the end
        i = sm.latest(hi_meas, rd.win_rank)
        ok = i >= 0
        ev = sm.order[np.maximum(i, 0)]
        H, K = g.n_host, g.n_gpu
        if K and sm.on_gpu:
            by_start = np.argsort(g.g_start, kind="stable")
            opener = by_start[np.minimum(np.searchsorted(g.g_start[by_start], hi_meas), K - 1)]
            exact = (g.g_start[opener] == hi_meas) & (g.g_rank[opener] == rd.win_rank)
            ev = np.where(exact, K + opener, ev)  # a GPU op's start, in StepMap's event numbering
            ok |= exact
        walk = np.flatnonzero(ok)
        e = ev[walk]  # StepMap's events: GPU op ends [0, K), starts [K, 2K), host starts, host ends
        w = walk[(e >= 2 * K) & (e < 2 * K + H)]  # a host node's start: host work up to the window's end
        node = e[(e >= 2 * K) & (e < 2 * K + H)] - 2 * K
        self.back(w, rep.h_start[node], HOST, acc.host_lane[node])
        self.kind[w], self.idx[w] = 0, node
        w = walk[(e >= K) & (e < 2 * K)]  # a GPU op's start: the op is still running
        p = ch.pos[e[(e >= K) & (e < 2 * K)] - K]
        self.back(w, ch.rs[p], ch.part[p], ch.lane[p])
        self.kind[w], self.idx[w] = 1, p
        w = walk[e >= 2 * K + H]  # a host node's end: walked as that node's end
        node = e[e >= 2 * K + H] - 2 * K - H
        self.back(w, rep.h_end[node], OTHER)
        self.kind[w], self.idx[w] = 2, node
        w = walk[e < K]  # a GPU op's end: its own time, then from its start
        p = ch.pos[e[e < K]]
        self.back(w, ch.re[p], OTHER)
        self.back(w, ch.rs[p], ch.part[p], ch.lane[p])
        self.kind[w], self.idx[w] = 1, p
        nw = np.flatnonzero(~ok)  # walks that found no event: the whole window is other
        acc.parts[nw, OTHER] += np.maximum(self.at[nw] - self.lo[nw], 0)
        self.kind[self.at <= self.lo] = -1

    def round(self) -> bool:
        """One jump for every live walk; False once all are done."""
        kind = self.kind
        live = np.flatnonzero(kind >= 0)
        if not len(live):
            return False
        self.gpu(live[kind[live] == 1])
        self.host(live[kind[live] == 0])
        self.wait(live[kind[live] == 2])
        kind[(kind >= 0) & (self.at <= self.lo)] = -1
        return True

    def back(self, w: np.ndarray, to: np.ndarray, part: np.ndarray | int, lane: np.ndarray | int = -1) -> None:
        """Walks ``w`` step back to ``to``: the time between is ``part`` on ``lane`` (none before the window)."""
        if not len(w):
            return
        at, lo = self.at[w], self.lo[w]
        start = np.maximum(np.minimum(to, at), lo)
        parts = np.broadcast_to(part, w.shape)
        acc = self.acc
        np.add.at(acc.parts, (w, parts), np.maximum(at - start, 0))
        acc.segments.append((w, np.broadcast_to(lane, w.shape), parts, start, np.maximum(at, start)))
        self.at[w] = np.minimum(at, to)

    def gpu(self, w: np.ndarray) -> None:
        """Walks at a GPU op's start: back through the run of ops each started by the one before it, then to
        what started the run's head."""
        if not len(w):
            return
        ch, acc, lo = self.ch, self.acc, self.lo
        head = ch.head[self.idx[w]]
        at = self.at[w]
        # the run's op under the time reached: the op itself, or an earlier one where the walk came from a wait
        # that ended before its op started
        p = np.maximum(_last_at_or_before(ch.rs, head, self.idx[w], at), head)
        self._held(w, p, np.maximum(ch.rs[p], lo[w]), at)  # of op p, from its start to the time reached
        u = _last_at_or_before(ch.rs, head, p, lo[w])  # the run's op under the window's start (head - 1: none)
        inside = u < head
        full_from = np.where(inside, head, u + 1)
        for p_i, part in enumerate(_RUN_PARTS):
            np.add.at(acc.parts, (w, np.full(len(w), part)), np.maximum(ch.cum[p_i, p] - ch.cum[p_i, full_from], 0))
        self._draw_run(w, np.where(inside, head, u), p, at)
        sw, su = w[~inside], u[~inside]  # the window starts inside the run: the op under its start, in part
        nxt_start = np.where(su < p[~inside], ch.rs[np.minimum(su + 1, len(ch.rs) - 1)], lo[sw])  # p: in tail
        self._held(sw, su, lo[sw], np.maximum(nxt_start, lo[sw]))
        self.at[sw] = lo[sw]
        self.kind[sw] = -1
        w, h = w[inside], head[inside]
        self.at[w] = np.minimum(self.at[w], ch.rs[h])
        if not len(w):
            return
        by_launch, by_cross = ch.by_launch[h], ch.by_cross[h]
        lw, lh = w[by_launch], h[by_launch]
        node = ch.launch[lh]
        self.back(lw, self.rep.h_end[node], LAUNCH, ch.lane[lh])  # from the call's return to the op's start
        self.back(lw, self.rep.h_start[node], HOST, self.acc.host_lane[node])  # the call's own time
        self.kind[lw], self.idx[lw] = 0, node
        cw, ch_h = w[by_cross], h[by_cross]
        src = ch.pos[ch.cross[ch_h]]
        self.back(cw, ch.re[src], ch.part[ch_h], ch.lane[ch_h])
        self.back(cw, ch.rs[src], ch.part[src], ch.lane[src])
        self.idx[cw] = src
        free = ~by_launch & ~by_cross  # started by nothing the graph knows: after the op before it on its
        # stream (the gap is other), else from the window's start
        after = free & ~ch.first[h]
        aw, prev = w[after], h[after] - 1
        self.back(aw, ch.re[prev], OTHER, ch.lane[prev])
        self.back(aw, ch.rs[prev], ch.part[prev], ch.lane[prev])
        self.idx[aw] = prev
        alone = free & ch.first[h]
        self.back(w[alone], lo[w[alone]], OTHER, ch.lane[h[alone]])
        self.kind[w[alone]] = -1

    def _held(self, w: np.ndarray, op: np.ndarray, start: np.ndarray, end: np.ndarray) -> None:
        """Walks ``w`` cross ``start..end`` (end >= start) of the stretch op ``op`` holds in its run: the op's part
        up to its held end, other beyond (a gap that nothing in the trace explains)."""
        over = np.maximum(end - np.maximum(self.ch.held_end[op], start), 0)
        np.add.at(self.acc.parts, (w, self.ch.part[op]), np.maximum(end - start, 0) - over)
        np.add.at(self.acc.parts, (w, np.full(len(w), OTHER)), over)

    def _draw_run(self, w: np.ndarray, first: np.ndarray, last: np.ndarray, at: np.ndarray) -> None:
        """The path's stretches over stream positions ``first..last`` of each walk (up to ``at``), one per run of
        ops of one part, so copies and compute in one run are drawn as what they are."""
        ch, lo = self.ch, self.lo
        r0, r1 = ch.crun[first], ch.crun[last]
        n = np.maximum(r1 - r0 + 1, 0)
        rw = np.repeat(w, n)
        r = np.repeat(r0, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        op = np.maximum(ch.crun_first[r], np.repeat(first, n))
        nxt = ch.crun_first[np.minimum(r + 1, len(ch.crun_first) - 1)]
        final = r == np.repeat(r1, n)
        end = np.where(final, np.repeat(at, n), ch.rs[nxt])
        end = np.minimum(end, ch.held_end[np.where(final, np.repeat(last, n), np.maximum(nxt - 1, 0))])
        start = np.maximum(ch.rs[op], lo[rw])
        self.acc.segments.append((rw, ch.lane[op], ch.part[op], start, np.maximum(end, start)))

    def host(self, w: np.ndarray) -> None:
        """Walks at a host node's start: back through its epoch (host work), then to the wait that opened it,
        or to the rank's start."""
        if not len(w):
            return
        rep, acc = self.rep, self.acc
        f = self.epoch_head[self.idx[w]]
        self.back(w, rep.h_start[f], HOST, acc.host_lane[f])
        opener = self.new_rank[f]
        ow, of = w[opener], f[opener]
        # before the rank's first node: host work where the host has recorded calls or ops (a profiled step's
        # data preparation), else other
        busy = self.host_busy.measure_in(np.minimum(self.lo[ow], self.at[ow]), self.at[ow])
        self.back(ow, self.at[ow] - busy, HOST, acc.host_lane[of])
        self.back(ow, self.lo[ow], OTHER)
        self.kind[ow] = -1
        ww, wf = w[~opener], f[~opener] - 1
        self.back(ww, rep.h_end[wf], HOST, acc.host_lane[wf])
        self.kind[ww], self.idx[ww] = 2, wf

    def wait(self, w: np.ndarray) -> None:
        """Walks at a host node's end: a wait released by its GPU op goes to that op; any other node's own time
        is host (a call) or sync (a wait that did not wait for the GPU)."""
        if not len(w):
            return
        ch, g, acc = self.ch, self.g, self.acc
        j = self.idx[w]
        bound = self.wait_bound[j]
        bw, bj = w[bound], j[bound]
        t = ch.pos[g.w_target[bj]]
        self.back(bw, ch.re[t], SYNC, acc.host_lane[bj])
        self.back(bw, ch.rs[t], ch.part[t], ch.lane[t])
        self.kind[bw], self.idx[bw] = 1, t
        sw, sj = w[~bound], j[~bound]
        self.back(sw, self.rep.h_start[sj], np.where(g.h_wait[sj], SYNC, HOST), acc.host_lane[sj])
        self.kind[sw], self.idx[sw] = 0, sj


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
