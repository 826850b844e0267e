"""Fixes as changes to the dependency graph: each returns a new Graph for the replay to re-time.

Every change is a PyTorch-level fix written in graph terms: a wait that no longer waits, a copy that runs at
pinned speed or on its own stream a step ahead, host time between launches taken out (CUDA graphs), host
time in data loading moved to worker processes, the recorder's own per-launch cost removed. Masks and index
arrays select host nodes (``h_*``) or GPU ops (``g_*``) of the graph.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from webapp.analysis.causal.graph import DEFAULT_BUBBLE_NS, Graph
from webapp.analysis.causal.segs import starts_of, take

GRAPH_LAUNCH_NS = 10_000
"""Host time of one CUDA graph launch (cudaGraphLaunch plus the Python around a compiled call), ns."""
GRAPH_BUBBLE_NS = 200
"""Gap between two kernels of one graph replay where the GPU model is not in :data:`GRAPH_BUBBLE_BY_GPU`, ns
(the larger of the two measured there: the saving is not overstated)."""
GRAPH_BUBBLE_BY_GPU = (("H100", 30), ("H200", 200))
"""Gap between two kernels of one graph replay per GPU model (a substring of the device's name), ns: a graph
of the same 400 ~1 us kernels (64 elements each) replayed 0.03 us a kernel over the kernels' own
stream-launched time on an H100 (1,180 over 1,152 ns) and 0.19 us on an H200 (1,085 over 896 ns). Larger
kernels ran further apart on the H100 (0.14, 0.40 and 0.41 us for 16K, 256K and 1M elements), which the trace
cannot tell from their times: where such kernels set a graph step's pace, the replay reads it fast
(:func:`graph_pace_note` says so)."""


def _graph_model(device_name: str) -> tuple[str, int]:
    """(the GPU model of :data:`GRAPH_BUBBLE_BY_GPU` in ``device_name``, its gap in ns); ("", GRAPH_BUBBLE_NS)
    for a model not there."""
    return next(((model, ns) for model, ns in GRAPH_BUBBLE_BY_GPU if model in device_name), ("", GRAPH_BUBBLE_NS))


def graph_bubble_ns(device_name: str) -> int:
    """The gap between a graph's kernels on the GPU named ``device_name`` (:data:`GRAPH_BUBBLE_BY_GPU`), ns."""
    return _graph_model(device_name)[1]


def graph_pace_note(device_name: str) -> str:
    """What the replay of a graph step assumes on the GPU named ``device_name``, for the findings that advise
    CUDA graphs."""
    model, bubble_ns = _graph_model(device_name)
    measured = ", ".join(f"an {m} {ns / 1000:g} us" for m, ns in GRAPH_BUBBLE_BY_GPU)
    said = f"as tiny kernels ran on an {model}" if model else f"the wider of the gaps measured ({measured})"
    return f"a graph's kernels replayed {bubble_ns / 1000:g} us apart, {said}; larger kernels ran up to 0.4 us apart"


GRAPH_RUN_GAP_NS = 200_000
"""Launches with less host time than this between them (one call's end to the next one's start) belong to
one captured region: the host time between
them is the framework's Python and dispatcher, which a captured graph replays without. Longer host work (data
loading, logging, checkpoints) stays outside the graph."""


def drop_waits(g: Graph, waits: np.ndarray, keep_ns: int = 0) -> Graph:
    """The selected waits no longer wait for the GPU: each takes ``keep_ns`` of host time (0: the call is
    gone; a non-blocking copy call's cost where the wait was a copy)."""
    waits = np.asarray(waits)
    if not len(waits):
        return g
    target = g.w_target.copy()
    w_min = g.w_min.copy()
    target[waits] = -1
    w_min[waits] = keep_ns
    return replace(g, w_target=target, w_min=w_min)


def quick_waits(g: Graph, waits: np.ndarray, min_ns: int) -> Graph:
    """The selected waits still wait for their GPU op but nothing else: they end a usual wake-up after it, or
    after ``min_ns`` of host time (a pinned download: no host-side staging copy after the GPU's)."""
    waits = np.asarray(waits)
    if not len(waits):
        return g
    w_min, wake = g.w_min.copy(), g.w_wake.copy()
    w_min[waits] = min_ns
    wake[waits] = int(g.wake_ns)
    return replace(g, w_min=w_min, w_wake=wake)


def pin_copies(g: Graph, ops: np.ndarray, pinned_gbps: float) -> Graph:
    """The selected copies run from pinned memory at ``pinned_gbps`` (GB/s = bytes per ns), never slower
    than now."""
    ops = np.asarray(ops)
    if not len(ops) or not pinned_gbps > 0:
        return g
    dur = g.g_dur.copy()
    dur[ops] = np.minimum(dur[ops], np.ceil(g.g_bytes[ops] / pinned_gbps).astype(np.int64))
    return replace(g, g_dur=dur)


def prefetch(g: Graph, ops: np.ndarray, key: np.ndarray) -> Graph:
    """The selected copies move to a stream of their own and are issued one step earlier: each is launched
    where the previous copy of its ``key`` (the same batch tensor) was launched, and the next op on its old
    stream waits for it (``wait_stream``). The first copy of each key keeps its launch."""
    ops = np.asarray(ops)
    if not len(ops):
        return g
    order = np.lexsort((g.g_start[ops], key, g.g_rank[ops]))
    ops, key = ops[order], np.asarray(key)[order]
    group = g.g_rank[ops].astype(np.int64) * (int(key.max()) + 1) + key
    first = starts_of(group)
    launch = g.g_launch.copy()
    earlier = np.roll(g.g_launch[ops], 1)
    launch[ops] = np.where(first, g.g_launch[ops], earlier)
    latency = g.g_latency.copy()
    latency[ops] = int(g.launch_latency_ns)
    stream = g.g_stream.copy()
    side = int(g.g_stream.max()) + 1
    stream[ops] = side
    bubble = g.g_bubble.copy()
    bubble[ops] = DEFAULT_BUBBLE_NS
    cross, cross_lat = g.g_cross.copy(), g.g_cross_lat.copy()
    nxt = _next_on_stream(g, ops)
    has = nxt >= 0
    cross[nxt[has]] = ops[has]
    cross_lat[nxt[has]] = DEFAULT_BUBBLE_NS
    cross[ops] = -1
    return replace(
        g, g_launch=launch, g_latency=latency, g_stream=stream, g_bubble=bubble, g_cross=cross, g_cross_lat=cross_lat
    )


def _next_on_stream(g: Graph, ops: np.ndarray, skip_selected: bool = True) -> np.ndarray:
    """For each op, the next op on its stream (FIFO order), passing over selected ops unless
    ``skip_selected`` is False; -1 where none."""
    order = np.lexsort((g.g_start, g.g_stream, g.g_rank))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    chosen = np.zeros(len(order), dtype=bool)
    if skip_selected:
        chosen[ops] = True
    # index of the next unselected position at or after each position
    idx = np.where(~chosen[order], np.arange(len(order)), len(order))
    nxt_free = np.minimum.accumulate(idx[::-1])[::-1]
    p = pos[ops] + 1
    cand = np.where(p < len(order), nxt_free[np.minimum(p, len(order) - 1)], len(order))
    ok = cand < len(order)
    out = np.full(len(ops), -1, dtype=np.int64)
    op_c = order[np.minimum(cand, len(order) - 1)]
    same = ok & (g.g_stream[op_c] == g.g_stream[ops]) & (g.g_rank[op_c] == g.g_rank[ops])
    out[same] = op_c[same]
    return out


def shorten(g: Graph, ops: np.ndarray, by_ns: np.ndarray) -> Graph:
    """The selected GPU ops run ``by_ns`` (ns, per op) shorter, never below zero: a collective that no longer
    waits inside for a rank that arrives late. An op that started before a shortened one ended (collectives
    of a backend's thread overlap) did not wait for it: its gap after that op grows by as much."""
    ops = np.asarray(ops)
    if not len(ops):
        return g
    dur = g.g_dur.copy()
    cut = np.minimum(np.asarray(by_ns, dtype=np.int64), dur[ops])
    dur[ops] -= cut
    bubble = g.g_bubble.copy()
    nxt = _next_on_stream(g, ops, skip_selected=False)
    overlapped = (nxt >= 0) & (bubble[np.maximum(nxt, 0)] < 0)
    np.add.at(bubble, nxt[overlapped], np.minimum(cut[overlapped], -bubble[nxt[overlapped]]))
    return replace(g, g_dur=dur, g_bubble=bubble)


def lengthen(g: Graph, ops: np.ndarray, by_ns: np.ndarray) -> Graph:
    """The selected GPU ops run ``by_ns`` (ns, per op) longer: a pageable copy from memory this process has not
    touched yet (a DataLoader worker's batch in shared memory), whose staging faults each page in."""
    ops = np.asarray(ops)
    if not len(ops):
        return g
    dur = g.g_dur.copy()
    dur[ops] += np.maximum(np.asarray(by_ns, dtype=np.int64), 0)
    return replace(g, g_dur=dur)


def cut_host(g: Graph, cut_ns: np.ndarray) -> Graph:
    """Host time before each node (its ``h_delta``) shortened by ``cut_ns`` (ns, per host node), never below
    zero."""
    delta = g.h_delta - np.minimum(np.asarray(cut_ns, dtype=np.int64), np.maximum(g.h_delta, 0))
    return replace(g, h_delta=delta)


def launch_follows(g: Graph) -> np.ndarray:
    """Host nodes that follow a CUDA call (not a wait) of the same epoch: their ``h_delta`` holds that call."""
    after = np.zeros(g.n_host, dtype=bool)
    if g.n_host > 1:
        after[1:] = ~g.h_wait[:-1] & (g.h_epoch[1:] == g.h_epoch[:-1])
    return after


def without_recorder(g: Graph, per_call_ns: float) -> Graph:
    """The recorder's own host cost per CUDA call (measured when recording started) taken out."""
    if not per_call_ns > 0:
        return g
    return cut_host(g, np.where(launch_follows(g), int(per_call_ns), 0))


def captured(g: Graph, nodes: np.ndarray, step: np.ndarray | None = None, bubble_ns: int = GRAPH_BUBBLE_NS) -> Graph:
    """CUDA graphs (or ``torch.compile(mode="reduce-overhead")``) over the selected host nodes: inside each run
    of selected calls closer than GRAPH_RUN_GAP_NS (and of one step, where ``step`` gives each node's), the
    host time between calls is gone, the run costs one graph launch and its kernels run ``bubble_ns`` apart
    (:func:`graph_bubble_ns`)."""
    sel = np.zeros(g.n_host, dtype=bool)
    sel[np.asarray(nodes)] = True
    sel &= ~g.h_wait
    gap = g.h_delta - np.concatenate(([0], g.h_launch_ns[:-1]))  # host time between the calls themselves
    inside = sel & launch_follows(g) & (gap <= GRAPH_RUN_GAP_NS)
    if step is not None and g.n_host > 1:
        inside[1:] &= step[1:] == step[:-1]
    prev_sel = np.zeros(g.n_host, dtype=bool)
    if g.n_host > 1:
        prev_sel[1:] = sel[:-1]
    inside &= prev_sel
    cut = np.where(inside, g.h_delta, 0)
    head = sel & ~inside
    delta = g.h_delta - cut + np.where(head & np.roll(inside, -1), GRAPH_LAUNCH_NS, 0)
    in_run = inside | (head & np.roll(inside, -1))
    graphed = (g.g_launch >= 0) & take(in_run.astype(np.int64), g.g_launch, 0).astype(bool)
    bubble = np.where(graphed, np.minimum(g.g_bubble, bubble_ns), g.g_bubble)
    return replace(g, h_delta=delta, g_bubble=bubble)


def faster_host(g: Graph, nodes: np.ndarray | None = None) -> Graph:
    """The bound on every host-side fix: the host's own time (between and inside its calls, not its waits)
    is zero for the selected nodes (all when ``nodes`` is None)."""
    cut = g.h_delta.copy() if nodes is None else np.where(np.isin(np.arange(g.n_host), nodes), g.h_delta, 0)
    return cut_host(g, cut)
