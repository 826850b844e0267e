"""The dependency graph of a run, built from its trace: what each host span and GPU op waited for.

Per rank, the graph has

- **host nodes**: the issuing host thread's CUDA calls (launches, copies) and waits, in start order. The
  main thread and threads that take turns with it (PyTorch's autograd thread runs backward while the main
  thread waits in ``backward()``) form one issuing sequence; threads that run beside it (communication,
  pin-memory) are not part of it and their GPU work keeps its measured distance from the issuing thread's
  latest node before it (``g_anchor``), except a communication backend's worker (gloo's): its collectives
  start as the issuing thread enqueues them, and its CUDA work follows the collective it serves. Where the
  issuing thread resumes as such a collective ends, after a gap with no CUDA call (``work.wait()``), the node
  before the gap is a wait for that collective. Host nodes split into *epochs* at each wait: inside an epoch
  every node keeps its offset from the epoch's start (the host's own work, ``h_delta`` start to start), and
  an epoch starts when the wait that closes the previous one ends.
- **GPU ops**: kernels, copies, memsets and collectives, per stream in FIFO order. An op starts at the
  latest of: the previous op on its stream ending (plus the usual bubble), its launch (the launching host
  node's start plus a launch latency), and a cross-stream dependency (an op on another stream it waited
  for, inferred where the op started late for no other reason).
- **waits**: a wait ends at the later of its own minimum duration and the end of the GPU op it waited for
  (the latest-ending op launched before it, ending when the wait ended) plus a wake-up latency.

Every parameter is measured from the trace so that the replay (webapp.analysis.causal.replay) reproduces
the measured times; a fix (webapp.analysis.causal.fixes) changes parameters and the replay re-times the
run. Times are int64 ns on the analysis axis (webapp.analysis.intervals.Timebase).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from collector.model import IntervalKind, LaneKind
from webapp.analysis.causal.segs import NEG, latest_in_rank, take
from webapp.analysis.context import RunData, kind_mask

QUEUE_SLACK_NS = 2_000
"""An op starting this soon after the previous op on its stream ended was queued behind it."""
LAUNCH_MAX_NS = 50_000
"""Longest launch latency believed (launch call start to op start on an idle stream): beyond it an op
waited for something else (another stream)."""
CROSS_SLACK_NS = 20_000
"""An op on another stream ending this little before a late op started is what the late op waited for."""
WAIT_SLACK_NS = 50_000
"""Host and GPU clocks agree to tens of us: a wait may end this much before the op it waited for ends."""
WAKE_MAX_NS = 200_000
"""A wait ending longer than this after its op ended was held by something the trace does not show."""
DEFAULT_LATENCY_NS = 5_000
"""Launch latency and wake-up latency where the trace has none to measure."""
DEFAULT_BUBBLE_NS = 1_000
"""Gap between two ops queued on one stream where the trace has none to measure."""
BACKOFF = 64
"""Candidates tried per query when looking for the op a wait or a late op waited for."""
BLOCKED_LAUNCH_NS = 50_000
"""A CUDA call that lasts longer than this and returns as a GPU op ends was blocked by a full launch queue
(the host ran so far ahead that the driver holds it until the GPU frees a slot): a wait for that op."""
COLLECTIVE_WAKE_NS = 1_000_000
"""The issuing thread resuming this soon after a collective of a backend's thread ends waited for it (its
``work.wait()`` returns once the worker has copied the result back and the waiting thread is scheduled)."""
OVERLAP_FRAC = 0.05
"""A host thread whose CUDA calls overlap the main thread's for more than this share of their time runs
beside it, not in turn with it."""

COMPUTE, COPY, COMM = range(3)
"""GPU op classes (``g_class``)."""


@dataclass(frozen=True)
class Graph:
    """Host nodes (``h_*``, sorted by rank then start), GPU ops (``g_*``, sorted by rank, stream, start) and
    epochs (``e_*``, one per wait plus one per rank). Index arrays point into the same graph; -1 is none.

    h_row, g_row: row in the run DataFrame. h_rank, g_rank, e_rank: rank.
    h_start, h_end, g_start, g_end: measured times (axis ns).
    h_wait: the node is a wait: a sync, or a CUDA call blocked by a full launch queue. h_sync: a sync (the
    trace's ``sync_wait``: the user's own waits). h_epoch: its epoch (a wait closes its own epoch).
    h_delta: host time from the previous node's start (the epoch's start for its first node), ns.
    h_launch_ns: host time of the node's own call (0 for waits), ns.
    w_min: a wait's duration when what it waits for is already done, ns. w_target: the GPU op it waited for.
    w_wake: time from that op's end to the wait's end, ns (may be negative: clocks differ by tens of us).
    g_stream: stream id (replay lane). g_dur, g_bubble: run time, and gap after the previous op when queued.
    g_launch: host node that launched it (-1: the op keeps ``g_fixed_ready``). g_latency: launch to start.
    g_fixed_ready: earliest start for ops not launched by the issuing thread (NEG otherwise).
    g_anchor: for such an op, the issuing thread's latest node of its rank starting at or before it (-1: none):
    a replay keeps the op's measured distance from that node, so the op moves with the program around it
    (another thread's copy, a backend's collective whose enqueue is unseen, a kernel of a trace without
    launch links) instead of staying at its measured time while the rest of the run moves.
    g_cross: op on another stream it waited for; g_cross_lat: that op's end to this op's start.
    g_class: COMPUTE, COPY or COMM. g_bytes: bytes of copies.
    e_start: measured start of each epoch (the previous wait's end); e_wait: the wait that closes it.
    """

    h_row: np.ndarray
    h_rank: np.ndarray
    h_start: np.ndarray
    h_end: np.ndarray
    h_wait: np.ndarray
    h_sync: np.ndarray
    h_epoch: np.ndarray
    h_delta: np.ndarray
    h_launch_ns: np.ndarray
    w_min: np.ndarray
    w_target: np.ndarray
    w_wake: np.ndarray
    g_row: np.ndarray
    g_rank: np.ndarray
    g_stream: np.ndarray
    g_start: np.ndarray
    g_end: np.ndarray
    g_dur: np.ndarray
    g_bubble: np.ndarray
    g_launch: np.ndarray
    g_latency: np.ndarray
    g_fixed_ready: np.ndarray
    g_anchor: np.ndarray
    g_cross: np.ndarray
    g_cross_lat: np.ndarray
    g_class: np.ndarray
    g_bytes: np.ndarray
    e_rank: np.ndarray
    e_start: np.ndarray
    e_wait: np.ndarray
    launch_latency_ns: float
    wake_ns: float
    linked_frac: float

    @property
    def n_host(self) -> int:
        return len(self.h_row)

    @property
    def n_gpu(self) -> int:
        return len(self.g_row)


def issuer_lanes(rd: RunData, host_rows: np.ndarray) -> np.ndarray:
    """Lanes (indices into trace.lanes) whose host calls form each rank's issuing sequence: per rank the lane
    with the most calls, and every CPU lane whose calls overlap those of the lanes taken so far for at most
    OVERLAP_FRAC of their time (threads taking turns, like the autograd thread). A communication backend's
    worker thread (a CPU lane with a collective lane of the same thread) runs beside it and is never taken."""
    lanes = rd.trace.lanes
    lane = rd.ints("lane", host_rows)
    counts = np.bincount(lane, minlength=len(lanes))
    worker = _on_worker_lanes(rd, np.arange(len(lanes)))
    chosen: list[int] = []
    for rank in sorted({ln.rank for ln in lanes}):
        cpu = [
            i
            for i, ln in enumerate(lanes)
            if ln.rank == rank and ln.kind is LaneKind.CPU_THREAD and counts[i] and not worker[i]
        ]
        if not cpu:
            continue
        cpu.sort(key=lambda i: -counts[i])
        taken = [cpu[0]]
        for other in cpu[1:]:
            mine = host_rows[np.isin(lane, taken)]
            theirs = host_rows[lane == other]
            busy = _union_measure(rd.s[theirs], rd.e[theirs])
            both = _union_measure(
                np.concatenate((rd.s[mine], rd.s[theirs])), np.concatenate((rd.e[mine], rd.e[theirs]))
            )
            overlap = busy + _union_measure(rd.s[mine], rd.e[mine]) - both
            if busy <= 0 or overlap <= OVERLAP_FRAC * busy:
                taken.append(other)
        chosen.extend(taken)
    return np.array(sorted(chosen), dtype=np.int64)


def _union_measure(s: np.ndarray, e: np.ndarray) -> int:
    from webapp.analysis.intervals import union

    return union(s, e).total


def build_graph(rd: RunData, keep: np.ndarray | None = None) -> Graph:
    """The run's dependency graph (see the module docstring); ``keep`` limits it to a mask of rows."""
    df = rd.trace.intervals
    n = len(df)
    lane = np.asarray(df["lane"])  # int32, as stored: no run-long int64 copy
    on_cpu = _on_cpu_lanes(rd, lane)
    gpu_rows = np.flatnonzero(rd.gpu_mask & ~on_cpu & (True if keep is None else keep))
    # GPU ops per stream, FIFO (start) order
    gpu_rows = gpu_rows[np.lexsort((rd.s[gpu_rows], lane[gpu_rows], rd.rank[gpu_rows]))]
    call_row = rd.rows_of_ids(rd.ints("launch_id", gpu_rows))  # row of the call that launched each op (-1: none)
    referenced = np.zeros(n, dtype=bool)
    referenced[call_row[call_row >= 0]] = True
    host_kind = kind_mask(rd.kind, IntervalKind.LAUNCH, IntervalKind.SYNC_WAIT) | (
        referenced & kind_mask(rd.kind, IntervalKind.CPU_OP)
    )
    host_rows = np.flatnonzero(host_kind & on_cpu & (True if keep is None else keep))
    issuing = np.isin(lane[host_rows], issuer_lanes(rd, host_rows))
    host_rows = host_rows[issuing]
    by_start = np.lexsort((rd.s[host_rows], rd.rank[host_rows]))
    g_launch = _node_of_rows(host_rows, by_start, call_row)
    host_rows = host_rows[by_start]

    h_start, h_end = rd.s[host_rows], rd.e[host_rows]
    h_rank = rd.rank[host_rows]
    h_sync = rd.kind[host_rows] == rd.code(IntervalKind.SYNC_WAIT)

    g_start, g_end = rd.s[gpu_rows], rd.e[gpu_rows]
    g_rank = rd.rank[gpu_rows]
    g_stream = lane[gpu_rows].astype(np.int64)
    g_class = np.full(len(gpu_rows), COMPUTE, dtype=np.int8)
    g_class[rd.copy_mask[gpu_rows]] = COPY
    g_class[kind_mask(rd.kind[gpu_rows], IntervalKind.COLLECTIVE)] = COMM
    by_thread = (g_class == COMM) & (g_launch < 0)  # collectives a backend's thread ran (gloo)
    _link_enqueued(h_rank, h_start, g_rank, g_start, by_thread, g_launch)
    worker_ops, served = _worker_ops(rd, lane, call_row, g_rank, g_start, g_end, by_thread, g_launch)

    h_wait = h_sync | _blocked_calls(h_rank, h_start, h_end, h_sync, g_rank, g_end, g_launch, g_start)
    held, held_on = _collective_holds(h_rank, h_start, h_end, h_wait, g_rank, g_start, g_end, by_thread)
    call_ns = h_end - h_start
    h_end = np.where(held, np.roll(h_start, -1), h_end)  # the wait lasts until the host goes on
    h_wait |= held
    epochs = _epochs(h_rank, h_start, h_end, h_wait)
    h_epoch, e_rank, e_start, e_wait = epochs
    h_delta = _deltas(h_start, h_epoch, e_start)
    is_call = ~h_wait
    h_launch_ns = np.where(is_call, h_end - h_start, 0)

    ops = _gpu_params(g_rank, g_stream, g_start, g_end, g_launch, h_start)
    g_bubble, g_latency, g_fixed_ready, g_cross, g_cross_lat, latency_ns = ops
    # a worker's op follows the collective it serves: an edge from it, and no measured wait of its own
    g_cross[worker_ops] = served
    g_cross_lat[worker_ops] = g_start[worker_ops] - g_end[served]
    g_latency[worker_ops] = np.minimum(g_start[worker_ops] - h_start[g_launch[worker_ops]], int(latency_ns))
    g_bubble[worker_ops] = np.minimum(g_bubble[worker_ops], QUEUE_SLACK_NS)
    is_wait_event = rd.matches("name", host_rows, lambda n: n == "cudaStreamWaitEvent")
    is_record = rd.matches("name", host_rows, lambda n: n.startswith("cudaEventRecord"))
    _event_edges(is_wait_event, is_record, h_rank, g_rank, g_stream, g_start, g_end, g_launch, g_cross, g_cross_lat)
    waits = _wait_params(h_rank, h_start, h_end, h_wait, g_rank, g_end, g_launch, g_start, h_start)
    w_min, w_target, w_wake, wake_ns = waits
    w_target[held] = held_on[held]
    w_min[held] = call_ns[held]
    w_wake[held] = h_end[held] - g_end[held_on[held]]
    nbytes = np.asarray(df["bytes"], dtype=np.int64)[gpu_rows]
    return Graph(
        h_row=host_rows,
        h_rank=h_rank,
        h_start=h_start,
        h_end=h_end,
        h_wait=h_wait,
        h_sync=h_sync,
        h_epoch=h_epoch,
        h_delta=h_delta,
        h_launch_ns=h_launch_ns,
        w_min=w_min,
        w_target=w_target,
        w_wake=w_wake,
        g_row=gpu_rows,
        g_rank=g_rank,
        g_stream=g_stream,
        g_start=g_start,
        g_end=g_end,
        g_dur=g_end - g_start,
        g_bubble=g_bubble,
        g_launch=g_launch,
        g_latency=g_latency,
        g_fixed_ready=g_fixed_ready,
        g_anchor=_anchors(h_rank, h_start, g_rank, g_start, g_fixed_ready > NEG),
        g_cross=g_cross,
        g_cross_lat=g_cross_lat,
        g_class=g_class,
        g_bytes=nbytes,
        e_rank=e_rank,
        e_start=e_start,
        e_wait=e_wait,
        launch_latency_ns=latency_ns,
        wake_ns=wake_ns,
        linked_frac=float((g_launch >= 0).mean()) if len(g_launch) else 0.0,
    )


def _node_of_rows(rows: np.ndarray, by_start: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Host node of each ``wanted`` row (-1: none), the nodes being ``rows[by_start]`` (``rows`` ascending):
    a search of the node rows, where a table over every row of the run would be run-long fresh memory."""
    if not len(rows):
        return np.full(len(wanted), -1, dtype=np.int64)
    node = np.empty(len(rows), dtype=np.int64)
    node[by_start] = np.arange(len(rows))
    pos = np.minimum(np.searchsorted(rows, wanted), len(rows) - 1)
    return np.where(rows[pos] == wanted, node[pos], -1)


def _link_enqueued(
    h_rank: np.ndarray,
    h_start: np.ndarray,
    g_rank: np.ndarray,
    g_start: np.ndarray,
    by_thread: np.ndarray,
    g_launch: np.ndarray,
) -> None:
    """Collectives run by a backend's own thread (``by_thread``: gloo) start when the issuing thread enqueues
    them: each is linked (in ``g_launch``) to the issuing sequence's last node starting at
    most LAUNCH_MAX_NS before it, so that it moves with the host in the replay."""
    free = np.flatnonzero(by_thread)
    if not len(free) or not len(h_start):
        return
    key = h_rank.astype(np.int64)  # nodes are sorted by rank, then start
    at = _search_sorted_by_rank(key, h_start, g_rank[free].astype(np.int64), g_start[free])
    ok = (at >= 0) & (g_start[free] - h_start[np.maximum(at, 0)] <= LAUNCH_MAX_NS)
    g_launch[free[ok]] = at[ok]


def _search_sorted_by_rank(rank: np.ndarray, start: np.ndarray, q_rank: np.ndarray, q_start: np.ndarray) -> np.ndarray:
    """For each query, the last index with the query's rank and a start at or before the query's (-1: none);
    ``rank``/``start`` sorted by rank, then start, which the analysis axis (ranks apart) also sorts by start."""
    i = np.searchsorted(start, q_start, side="right") - 1
    ok = (i >= 0) & (rank[np.maximum(i, 0)] == q_rank)
    return np.where(ok, i, -1)


def _worker_ops(
    rd: RunData,
    lane: np.ndarray,
    call_row: np.ndarray,
    g_rank: np.ndarray,
    g_start: np.ndarray,
    g_end: np.ndarray,
    by_thread: np.ndarray,
    g_launch: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """GPU ops a communication backend's worker thread launched (``call_row``: each op's launching row) for a
    collective in flight that the issuing thread enqueued: those ops, and the collective each serves. Each
    is linked (in ``g_launch``) to that collective's launching node, so it moves with the collective."""
    on_worker = (call_row >= 0) & (g_launch < 0) & _on_worker_lanes(rd, take(lane, call_row, -1))
    served = _collective_of(g_rank, g_start, g_end, by_thread, g_rank[on_worker], take(rd.s, call_row[on_worker], 0))
    keep = (served >= 0) & (take(g_launch, served, -1) >= 0)
    ops, served = np.flatnonzero(on_worker)[keep], served[keep]
    g_launch[ops] = g_launch[served]
    return ops, served


def _on_worker_lanes(rd: RunData, lane: np.ndarray) -> np.ndarray:
    """Whether each lane (-1: none) is a communication backend's worker thread: a CPU lane with a collective
    lane of the same thread."""
    lanes = rd.trace.lanes
    comm = {(ln.rank, ln.ident) for ln in lanes if ln.kind is LaneKind.COMM_STREAM}
    worker = [ln.kind is LaneKind.CPU_THREAD and (ln.rank, ln.ident) in comm for ln in lanes] + [False]
    return np.array(worker, dtype=bool)[np.where(lane >= 0, lane, len(lanes))]


def _collective_of(
    g_rank: np.ndarray, g_start: np.ndarray, g_end: np.ndarray, by_thread: np.ndarray, rank: np.ndarray, t: np.ndarray
) -> np.ndarray:
    """For each (rank, time): the collective of a backend's thread (``by_thread``) in flight then that ends
    first (its worker's calls come as it finishes), -1 where none is."""
    out = np.full(len(t), -1, dtype=np.int64)
    coll = np.flatnonzero(by_thread)
    if not len(coll) or not len(t):
        return out
    coll = coll[np.lexsort((g_end[coll], g_rank[coll]))]
    # the first end at or after t on the rank: the last end before t, plus one
    at = _search_sorted_by_rank(g_rank[coll].astype(np.int64), g_end[coll], rank.astype(np.int64), t - 1)
    nxt = np.where(at >= 0, at + 1, np.searchsorted(g_rank[coll], rank, side="left"))
    ok = nxt < len(coll)
    cand = coll[np.minimum(nxt, len(coll) - 1)]
    ok &= (g_rank[cand] == rank) & (g_start[cand] <= t) & (g_end[cand] >= t)
    out[ok] = cand[ok]
    return out


def _on_cpu_lanes(rd: RunData, lane: np.ndarray) -> np.ndarray:
    """Whether each lane (-1: none) is a CPU thread's."""
    cpu = np.array([ln.kind is LaneKind.CPU_THREAD for ln in rd.trace.lanes] + [False])  # the last is lane -1's
    return cpu[lane]


def _epochs(
    h_rank: np.ndarray, h_start: np.ndarray, h_end: np.ndarray, h_wait: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Epoch of each host node, and per epoch its rank, measured start and closing wait (-1: none)."""
    m = len(h_rank)
    if not m:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    new_rank = np.ones(m, dtype=bool)
    new_rank[1:] = h_rank[1:] != h_rank[:-1]
    after_wait = np.zeros(m, dtype=bool)
    after_wait[1:] = h_wait[:-1] & ~new_rank[1:]
    opens = new_rank | after_wait
    h_epoch = np.cumsum(opens) - 1
    first = np.flatnonzero(opens)
    e_rank = h_rank[first]
    prev = first - 1
    e_start = np.where(new_rank[first], h_start[first], h_end[np.maximum(prev, 0)])
    e_wait = np.full(len(first), -1, dtype=np.int64)
    w = np.flatnonzero(h_wait)
    e_wait[h_epoch[w]] = w
    return h_epoch, e_rank, e_start, e_wait


def _deltas(h_start: np.ndarray, h_epoch: np.ndarray, e_start: np.ndarray) -> np.ndarray:
    """Start-to-start host time within each epoch; the first node's from the epoch's start."""
    delta = np.empty(len(h_start), dtype=np.int64)
    if not len(h_start):
        return delta
    delta[0] = h_start[0] - e_start[h_epoch[0]]
    delta[1:] = h_start[1:] - h_start[:-1]
    first = np.ones(len(h_start), dtype=bool)
    first[1:] = h_epoch[1:] != h_epoch[:-1]
    delta[first] = h_start[first] - e_start[h_epoch[first]]
    return delta


def _gpu_params(
    g_rank: np.ndarray,
    g_stream: np.ndarray,
    g_start: np.ndarray,
    g_end: np.ndarray,
    g_launch: np.ndarray,
    h_start: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Per op: bubble, launch latency, fixed earliest start, cross-stream source and its latency."""
    k = len(g_start)
    same = np.zeros(k, dtype=bool)
    if k > 1:
        same[1:] = (g_stream[1:] == g_stream[:-1]) & (g_rank[1:] == g_rank[:-1])
    prev_end = np.where(same, np.roll(g_end, 1), NEG)
    linked = g_launch >= 0
    issued = np.where(linked, h_start[np.maximum(g_launch, 0)], g_start) if len(h_start) else g_start.copy()
    lat_obs = g_start - issued
    gap = g_start - prev_end
    # launch latency from ops that were clearly started by their launch (issued after the stream went idle)
    free = linked & (issued >= prev_end) & (lat_obs >= 0) & (lat_obs <= LAUNCH_MAX_NS)
    latency_ns = float(np.median(lat_obs[free])) if free.any() else float(DEFAULT_LATENCY_NS)
    # queued: issued in time to start right after the previous op; its start follows that op's end
    queued = same & ((gap <= QUEUE_SLACK_NS) | (issued + latency_ns <= prev_end + QUEUE_SLACK_NS))
    small = queued & (gap >= 0) & (gap <= QUEUE_SLACK_NS)
    bubble_ns = int(np.median(gap[small])) if small.any() else DEFAULT_BUBBLE_NS
    short = queued & (gap <= LAUNCH_MAX_NS)
    bubble = np.where(short, gap, bubble_ns).astype(np.int64)
    latency = np.where(queued, np.minimum(lat_obs, int(latency_ns)), lat_obs).astype(np.int64)
    # late: neither its stream nor its launch explains the start: an op on another stream it waited for
    late = linked & ((queued & ~short) | (~queued & (lat_obs > max(LAUNCH_MAX_NS, 3 * latency_ns))))
    cross = np.full(k, -1, dtype=np.int64)
    cross_lat = np.zeros(k, dtype=np.int64)
    if late.any():
        ops = np.flatnonzero(late)
        order = np.argsort(g_end, kind="stable")  # the axis keeps ranks apart: one sort serves all ranks

        def other_stream(q: np.ndarray, cand: np.ndarray) -> np.ndarray:
            op = ops[q]
            return (g_rank[cand] == g_rank[op]) & (g_stream[cand] != g_stream[op]) & (issued[cand] <= issued[op])

        src = _latest_before(g_end[order], order, g_start[ops], g_start[ops] - CROSS_SLACK_NS, other_stream)
        found = src >= 0
        rows = ops[found]
        cross[rows] = src[found]
        cross_lat[rows] = g_start[rows] - g_end[src[found]]
        latency[rows] = np.minimum(lat_obs[rows], int(latency_ns))
        unexplained = ops[~found & queued[ops]]
        bubble[unexplained] = gap[unexplained]  # a delay after the previous op that the trace does not explain
    fixed = np.where(linked, NEG, g_start).astype(np.int64)
    return bubble, latency, fixed, cross, cross_lat, latency_ns


def _anchors(
    h_rank: np.ndarray, h_start: np.ndarray, g_rank: np.ndarray, g_start: np.ndarray, unlaunched: np.ndarray
) -> np.ndarray:
    """Graph.g_anchor: for each ``unlaunched`` op, the latest host node of its rank starting at or before it
    (host nodes are sorted by rank, then start); -1 for the others and where none is."""
    out = np.full(len(g_start), -1, dtype=np.int64)
    ops = np.flatnonzero(unlaunched)
    out[ops] = latest_in_rank(h_rank, h_start, g_rank[ops], g_start[ops])
    return out


def _event_edges(
    is_wait_event: np.ndarray,
    is_record: np.ndarray,
    h_rank: np.ndarray,
    g_rank: np.ndarray,
    g_stream: np.ndarray,
    g_start: np.ndarray,
    g_end: np.ndarray,
    g_launch: np.ndarray,
    g_cross: np.ndarray,
    g_cross_lat: np.ndarray,
) -> None:
    """Cross-stream edges from event waits (``cudaStreamWaitEvent``, as ``wait_stream`` issues them), filled
    into ``g_cross``/``g_cross_lat`` where timing alone found none. The trace does not say which stream waits:
    on each stream, the first op launched after the wait waits for the op launched last, before the event
    record that precedes the wait, on any other stream. Edges the measured times contradict are dropped, and
    an edge's latency is capped so that it never moves a measured start."""
    waits = np.flatnonzero(is_wait_event)
    records = np.flatnonzero(is_record)
    linked = np.flatnonzero(g_launch >= 0)
    if not len(waits) or not len(records) or not len(linked):
        return
    rec = records[np.maximum(np.searchsorted(records, waits, side="left") - 1, 0)]
    ok = (rec < waits) & (h_rank[rec] == h_rank[waits])
    waits, rec = waits[ok], rec[ok]
    by_launch = linked[np.lexsort((g_launch[linked], g_stream[linked], g_rank[linked]))]
    key = g_rank[by_launch] * (int(g_stream.max()) + 1) + g_stream[by_launch]
    bounds = np.flatnonzero(np.diff(key)) + 1
    groups = np.split(by_launch, bounds)
    firsts: list[np.ndarray] = []  # per stream: first op launched after each wait (-1: none)
    lasts: list[np.ndarray] = []  # per stream: last op launched before each wait's record (-1: none)
    for on in groups:
        launches = g_launch[on]
        i = np.searchsorted(launches, waits, side="right")
        same = g_rank[on[0]] == h_rank[waits]
        firsts.append(np.where(same & (i < len(on)), on[np.minimum(i, len(on) - 1)], -1))
        j = np.searchsorted(launches, rec, side="left") - 1
        lasts.append(np.where(same & (j >= 0), on[np.maximum(j, 0)], -1))
    for y, dst in enumerate(firsts):
        src = np.full(len(waits), -1, dtype=np.int64)
        for x, cand in enumerate(lasts):
            if x == y:
                continue
            newer = (cand >= 0) & ((src < 0) | (g_launch[np.maximum(cand, 0)] > g_launch[np.maximum(src, 0)]))
            src = np.where(newer, cand, src)
        has = (dst >= 0) & (src >= 0)
        d, c = dst[has], src[has]
        free = (g_cross[d] < 0) & (g_end[c] <= g_start[d] + CROSS_SLACK_NS)
        d, c = d[free], c[free]
        g_cross[d] = c
        g_cross_lat[d] = np.minimum(DEFAULT_BUBBLE_NS, g_start[d] - g_end[c])


def _latest_before(
    end_sorted: np.ndarray,
    order: np.ndarray,
    limit: np.ndarray,
    lower: np.ndarray,
    accept: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> np.ndarray:
    """For each query i, the op (index into the graph's ops) with the latest end in ``[lower[i], limit[i]]``
    that ``accept(query_index, op)`` takes; -1 where none does within BACKOFF tries."""
    out = np.full(len(limit), -1, dtype=np.int64)
    if not len(end_sorted) or not len(limit):
        return out
    j = np.searchsorted(end_sorted, limit, side="right") - 1
    todo = np.arange(len(limit))
    for _ in range(BACKOFF):
        live = (j >= 0) & (end_sorted[np.maximum(j, 0)] >= lower[todo])
        todo, j = todo[live], j[live]
        if not len(todo):
            break
        cand = order[j]
        ok = accept(todo, cand)
        out[todo[ok]] = cand[ok]
        todo, j = todo[~ok], j[~ok] - 1
    return out


def _blocked_calls(
    h_rank: np.ndarray,
    h_start: np.ndarray,
    h_end: np.ndarray,
    h_sync: np.ndarray,
    g_rank: np.ndarray,
    g_end: np.ndarray,
    g_launch: np.ndarray,
    g_start: np.ndarray,
) -> np.ndarray:
    """CUDA calls held by a full launch queue: longer than BLOCKED_LAUNCH_NS and released as an op launched
    before them ended (within a usual wake-up)."""
    long_call = ~h_sync & (h_end - h_start > BLOCKED_LAUNCH_NS)
    if not long_call.any() or not len(g_end):
        return np.zeros(len(h_start), dtype=bool)
    _, target, _, _ = _wait_params(h_rank, h_start, h_end, long_call, g_rank, g_end, g_launch, g_start, h_start)
    has = long_call & (target >= 0)
    t_end = np.where(has, g_end[np.maximum(target, 0)], NEG)
    return has & (t_end >= h_start) & (t_end <= h_end + WAIT_SLACK_NS) & (h_end - t_end <= WAKE_MAX_NS)


def _collective_holds(
    h_rank: np.ndarray,
    h_start: np.ndarray,
    h_end: np.ndarray,
    h_wait: np.ndarray,
    g_rank: np.ndarray,
    g_start: np.ndarray,
    g_end: np.ndarray,
    by_thread: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Host nodes after which the issuing thread waited for a collective without a CUDA call (gloo's
    ``work.wait()`` on CUDA tensors): a gap of at least BLOCKED_LAUNCH_NS before the next node that ends within
    COLLECTIVE_WAKE_NS after a collective of a backend's thread (``by_thread``) ends, the collective in flight
    when the gap began (or begun within COLLECTIVE_WAKE_NS after). Per node: held, and the collective it waited
    for (-1)."""
    m = len(h_start)
    held = np.zeros(m, dtype=bool)
    on = np.full(m, -1, dtype=np.int64)
    coll = np.flatnonzero(by_thread)
    if m < 2 or not len(coll):
        return held, on
    p = np.flatnonzero((h_rank[1:] == h_rank[:-1]) & ~h_wait[:-1])
    p = p[h_start[p + 1] - h_end[p] >= BLOCKED_LAUNCH_NS]
    if not len(p):
        return held, on
    gap_start, gap_end = h_end[p], h_start[p + 1]
    order = coll[np.argsort(g_end[coll], kind="stable")]

    def in_flight(q: np.ndarray, cand: np.ndarray) -> np.ndarray:
        # in flight as the gap began, or started by the backend's thread right after the call before it (the
        # enqueue), within COLLECTIVE_WAKE_NS
        began = g_start[cand] <= gap_start[q] + COLLECTIVE_WAKE_NS
        return (g_rank[cand] == h_rank[p[q]]) & began & (g_end[cand] >= gap_start[q])

    found = _latest_before(g_end[order], order, gap_end, gap_end - COLLECTIVE_WAKE_NS, in_flight)
    ok = found >= 0
    held[p[ok]] = True
    on[p[ok]] = found[ok]
    return held, on


def _wait_params(
    h_rank: np.ndarray,
    h_start: np.ndarray,
    h_end: np.ndarray,
    h_wait: np.ndarray,
    g_rank: np.ndarray,
    g_end: np.ndarray,
    g_launch: np.ndarray,
    g_start: np.ndarray,
    node_start: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Per host node: minimum wait, the GPU op waited for and the wake-up latency (waits only)."""
    m = len(h_start)
    dur = h_end - h_start
    w_min = np.where(h_wait, dur, 0).astype(np.int64)
    target = np.full(m, -1, dtype=np.int64)
    wake = np.zeros(m, dtype=np.int64)
    waits = np.flatnonzero(h_wait)
    if not len(waits) or not len(g_end):
        return w_min, target, wake, float(DEFAULT_LATENCY_NS)
    issued = np.where(g_launch >= 0, node_start[np.maximum(g_launch, 0)], g_start) if m else g_start
    order = np.argsort(g_end, kind="stable")

    def launched_before(q: np.ndarray, cand: np.ndarray) -> np.ndarray:
        w = waits[q]
        return (g_rank[cand] == h_rank[w]) & (issued[cand] <= h_start[w])

    lower = np.full(len(waits), NEG, dtype=np.int64)
    target[waits] = _latest_before(g_end[order], order, h_end[waits] + WAIT_SLACK_NS, lower, launched_before)
    has = target >= 0
    t_end = np.where(has, g_end[np.maximum(target, 0)], NEG)
    binding = h_wait & has & (t_end >= h_start) & (h_end - t_end <= WAKE_MAX_NS)
    wake_obs = h_end - t_end
    wake_ns = float(np.median(np.maximum(wake_obs[binding], 0))) if binding.any() else float(DEFAULT_LATENCY_NS)
    loose = h_wait & ~binding
    free_dur = dur[loose & has]
    api_ns = int(np.median(free_dur)) if len(free_dur) else DEFAULT_LATENCY_NS
    w_min = np.where(binding, np.minimum(dur, api_ns), w_min)
    wake = np.where(binding, wake_obs, np.where(has, np.minimum(int(wake_ns), wake_obs), 0)).astype(np.int64)
    return w_min, target, wake, wake_ns
