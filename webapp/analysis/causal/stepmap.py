"""Step windows on a replayed timeline: where each measured window's ends land after a replay.

A window end is tied to the latest event of its rank at or before it and moves with that event. Windows
placed on the GPU's work (webapp.analysis.steps, basis "gpu" or "annotation") are tied to GPU op starts and
ends, a start winning ties, so a window that opens at its first kernel opens there in the replay too;
windows placed on host markers are tied to host nodes' starts and ends.
"""

from __future__ import annotations

import numpy as np

from webapp.analysis.causal.graph import COMPUTE, Graph
from webapp.analysis.causal.replay import Replayed
from webapp.analysis.context import RunData


class StepMap:
    """Maps measured axis times to replayed ones through the graph's events."""

    def __init__(self, g: Graph, on_gpu: bool = True) -> None:
        on_gpu = on_gpu and g.n_gpu > 0 or not g.n_host
        self.on_gpu = on_gpu
        meas = np.concatenate((g.g_end, g.g_start, g.h_start, g.h_end))
        k, m = g.n_gpu, g.n_host
        tie = np.concatenate((np.zeros(k, np.int8), np.full(k, 2, np.int8), np.ones(2 * m, np.int8)))
        compute = g.g_class == COMPUTE
        gpu_ok = compute if compute.any() else np.ones(k, dtype=bool)
        use = np.concatenate((gpu_ok, gpu_ok, np.full(2 * m, not on_gpu)))
        order = np.lexsort((tie, meas))
        order = order[use[order]]
        self.order = order  # event index: [0, k) GPU ends, [k, 2k) GPU starts, then host starts and ends
        self.meas = meas[order]
        self.rank = np.concatenate((g.g_rank, g.g_rank, g.h_rank, g.h_rank))[order]

    def events(self, rep: Replayed) -> np.ndarray:
        """Replayed times of the events, in the order of ``meas``."""
        return np.concatenate((rep.g_end, rep.g_start, rep.h_start, rep.h_end))[self.order]

    def warp(self, rep: Replayed, t: np.ndarray, rank: np.ndarray) -> np.ndarray:
        """Replayed time of each measured time ``t`` (axis ns) of ``rank``."""
        if not len(self.meas):  # no host call or GPU op in the graph: nothing moves
            return np.asarray(t).copy()
        times = self.events(rep)
        i = np.searchsorted(self.meas, t, side="right") - 1
        ok = (i >= 0) & (self.rank[np.maximum(i, 0)] == rank)
        j = np.maximum(i, 0)
        return np.where(ok, times[j] + (t - self.meas[j]), t)


def step_times(rd: RunData, sm: StepMap, rep: Replayed) -> np.ndarray:
    """Replayed duration of each step window of ``rd`` (ns, aligned with rd.win)."""
    if not len(rd.win):
        return np.zeros(0, dtype=np.int64)
    start = sm.warp(rep, rd.win.starts, rd.win_rank)
    end = sm.warp(rep, rd.win.ends, rd.win_rank)
    return end - start
