"""Step windows on a replayed timeline: where each measured window's ends land after a replay.

Windows placed on the GPU's work (webapp.analysis.steps, basis "gpu" or "annotation") are placed again the
same way on the replayed run: a window opens where the first op of its step starts on a stream that runs
kernels (a copy there too), and ends where the next window of its rank opens. An op a fix moves to another
stream (a prefetched copy) no longer opens its step there, as it would not in the fixed run. Every other
window end (a rank's last, windows placed on host markers, windows no op of their step opens) is tied to
the latest event of its rank at or before it and moves with that event: GPU op starts and ends for windows
on the GPU's work (a start winning ties), host nodes' starts and ends and kernels' for windows on host
markers.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from webapp.analysis.causal.graph import COMPUTE, Graph
from webapp.analysis.causal.replay import Replayed
from webapp.analysis.causal.segs import latest_in_rank
from webapp.analysis.context import RunData

_NONE = np.iinfo(np.int64).max


class StepMap:
    """Maps measured axis times to replayed ones through the graph's events (``meas``: their measured times,
    sorted by rank then time; ``order``: their index, GPU op ends [0, k), starts [k, 2k), then host starts
    and ends; ``rank``), and places GPU-aligned windows on a replay (:func:`step_times`)."""

    def __init__(self, g: Graph, on_gpu: bool = True, rd: RunData | None = None) -> None:
        on_gpu = on_gpu and g.n_gpu > 0 or not g.n_host
        self.on_gpu = on_gpu
        meas = np.concatenate((g.g_end, g.g_start, g.h_start, g.h_end))
        rank = np.concatenate((g.g_rank, g.g_rank, g.h_rank, g.h_rank))
        k, m = g.n_gpu, g.n_host
        tie = np.concatenate((np.zeros(k, np.int8), np.full(k, 2, np.int8), np.ones(2 * m, np.int8)))
        self.kernel_streams = np.unique(g.g_stream[g.g_class == COMPUTE])
        """Streams that run kernels: the ops on them place windows (webapp.analysis.steps), copies too."""
        on_kernels = np.isin(g.g_stream, self.kernel_streams) if len(self.kernel_streams) else np.ones(k, bool)
        # host-marker windows also follow the kernels near their ends, not the copies
        gpu_use = on_kernels if on_gpu or not len(self.kernel_streams) else g.g_class == COMPUTE
        use = np.concatenate((gpu_use, gpu_use, np.full(2 * m, not on_gpu)))
        order = np.lexsort((tie, meas, rank))
        order = order[use[order]]
        self.order = order
        self.meas = meas[order]
        self.rank = rank[order]
        self.op_win = np.full(k, -1, dtype=np.int64)
        """Per GPU op, the window its step's ops open (-1: none, or not on a stream that runs kernels)."""
        self.opened = np.zeros(0, dtype=bool)
        """Per window, whether the first op of its step opened it (else its start is tied to an event)."""
        self.next_win = np.zeros(0, dtype=np.int64)
        """Per window, the next window of its rank (-1 for a rank's last)."""
        if on_gpu and rd is not None and len(rd.win):
            self._place(rd, g, on_kernels)

    def _place(self, rd: RunData, g: Graph, on_kernels: np.ndarray) -> None:
        n = len(rd.win)
        wins = pd.MultiIndex.from_arrays([rd.win_rank, rd.win_step])
        tag = rd.ints("step", g.g_row)
        op_win = wins.get_indexer(pd.MultiIndex.from_arrays([g.g_rank, tag])).astype(np.int64)
        op_win[~on_kernels] = -1
        first = np.full(n, _NONE, dtype=np.int64)
        placed = op_win >= 0
        np.minimum.at(first, op_win[placed], g.g_start[placed])
        self.op_win = op_win
        self.opened = first == rd.win.starts
        by_rank = np.lexsort((rd.win.starts, rd.win_rank))
        nxt = np.full(n, -1, dtype=np.int64)
        same = rd.win_rank[by_rank[1:]] == rd.win_rank[by_rank[:-1]]
        nxt[by_rank[:-1][same]] = by_rank[1:][same]
        self.next_win = nxt

    def events(self, rep: Replayed, at: np.ndarray) -> np.ndarray:
        """Replayed times of the events at ``at`` (indices into ``meas``), read from the replay's arrays where
        they lie: joining those would be an array as long as the graph, for a few windows' ends."""
        src = self.order[at]
        out = np.empty(len(src), dtype=np.int64)
        base = 0
        for times in (rep.g_end, rep.g_start, rep.h_start, rep.h_end):
            part = (src >= base) & (src < base + len(times))
            out[part] = times[src[part] - base]
            base += len(times)
        return out

    def latest(self, t: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Per measured time ``t`` (axis ns) of ``rank``: the index into ``meas`` of its rank's latest event at
        or before it (a start winning ties), -1 where there is none."""
        return latest_in_rank(self.rank, self.meas, np.asarray(rank, dtype=np.int64), np.asarray(t, dtype=np.int64))

    def warp(self, rep: Replayed, t: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Replayed time of each measured time ``t`` (axis ns) of ``rank``: its latest event's replayed time
        plus the measured time since that event (``t`` itself where its rank has none before it)."""
        t = np.asarray(t, dtype=np.int64)
        if not len(self.meas):  # no host call or GPU op in the graph: nothing moves
            return t.copy()
        i = self.latest(t, rank)
        j = np.maximum(i, 0)
        return np.where(i >= 0, self.events(rep, j) + (t - self.meas[j]), t)


def step_times(rd: RunData, sm: StepMap, rep: Replayed, streams: np.ndarray | None = None) -> np.ndarray:
    """Replayed duration of each step window of ``rd`` (ns, aligned with rd.win). ``streams``: each GPU op's
    stream in the replayed graph, where a fix moved ops (None: as measured)."""
    if not len(rd.win):
        return np.zeros(0, dtype=np.int64)
    start = sm.warp(rep, rd.win.starts, rd.win_rank)
    end = sm.warp(rep, rd.win.ends, rd.win_rank)
    if len(sm.opened):
        placed = sm.op_win >= 0
        if streams is not None:
            placed &= np.isin(streams, sm.kernel_streams)
        first = np.full(len(rd.win), _NONE, dtype=np.int64)
        np.minimum.at(first, sm.op_win[placed], rep.g_start[placed])
        start = np.where(sm.opened & (first < _NONE), first, start)
        nxt = sm.next_win
        end = np.where(nxt >= 0, start[np.maximum(nxt, 0)], end)
    return end - start
