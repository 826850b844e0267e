"""What the run page shows of many ranks: one summary lane per rank and the rank x step grid.

A **summary lane** splits a window into equal bins and gives, per rank and bin, the percent of the bin the
rank spends in collectives (``comm``) and the percent it is busy outside them (``busy``); the rest is idle.
A rank's work is its GPU work (kernels, memsets, copies) when it has any, else its host work (every host
interval but sync waits). Each rank's sets are built once per index (unions with prefix sums), so any
window costs two binary searches per bin edge.

The **step grid** is the per (rank, step) table of webapp.analysis.ranks.rank_steps laid out as matrices
(rows = ranks, columns = steps) for the run page's heatmaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from collector.model import COPY_KINDS, KIND_CODE, KIND_NAMES, IntervalKind
from webapp.analysis import intervals as iv
from webapp.analysis.lod import RunIndex
from webapp.analysis.perindex import PerIndex

MAX_CELLS = 2_000_000
"""At most this many (rank, bin) cells per summary answer: many ranks get fewer bins each."""
MIN_BINS = 50
MAX_GRID_STEPS = 500
"""The step grid keeps at most this many steps (evenly spaced) of a long run."""

_GPU_WORK = np.zeros(len(KIND_NAMES), dtype=bool)
_GPU_WORK[[KIND_CODE[k] for k in (IntervalKind.KERNEL, IntervalKind.MEMSET, *COPY_KINDS)]] = True
_HOST_WORK = np.ones(len(KIND_NAMES), dtype=bool)
_HOST_WORK[[KIND_CODE[IntervalKind.SYNC_WAIT], KIND_CODE[IntervalKind.COLLECTIVE]]] = False
_COMM = KIND_CODE[IntervalKind.COLLECTIVE]


@dataclass(frozen=True)
class RankSets:
    """Per rank, its ``work`` and ``comm`` time over the whole run (Segments on the run clock, ns)."""

    work: dict[int, iv.Segments]
    comm: dict[int, iv.Segments]


_sets: PerIndex[RankSets] = PerIndex()


def rank_sets(index: RunIndex) -> RankSets:
    """The run's RankSets, built on first use and kept as long as the index is alive."""
    return _sets.get(index, lambda: _build(index))


def _build(index: RunIndex) -> RankSets:
    gpu: dict[int, list[np.ndarray]] = {}
    host: dict[int, list[np.ndarray]] = {}
    comm: dict[int, list[np.ndarray]] = {}
    for lane, (lo, hi) in zip(index.lanes, index.lane_bounds, strict=True):
        rows = np.arange(lo, hi)
        k = index.kind[lo:hi]
        table = _GPU_WORK if lane.kind.is_gpu else _HOST_WORK
        (gpu if lane.kind.is_gpu else host).setdefault(lane.rank, []).append(rows[table[k]])
        comm.setdefault(lane.rank, []).append(rows[k == _COMM])
    ranks = sorted(set(gpu) | set(host))
    work, coll = {}, {}
    for r in ranks:
        own = np.concatenate(gpu.get(r, []) or [np.zeros(0, np.int64)])
        if not len(own):
            own = np.concatenate(host.get(r, []) or [np.zeros(0, np.int64)])
        work[r] = iv.union(index.start[own], index.end[own])
        c = np.concatenate(comm.get(r, []) or [np.zeros(0, np.int64)])
        coll[r] = iv.union(index.start[c], index.end[c])
    return RankSets(work, coll)


def summary_bins(width_px: int, n_ranks: int) -> int:
    """Bins per rank for a window ``width_px`` wide: one per pixel, fewer when many ranks would pass
    MAX_CELLS (never under MIN_BINS)."""
    return int(max(1, min(width_px, max(MIN_BINS, MAX_CELLS // max(1, n_ranks)))))


def rank_summary(index: RunIndex, t0: int, t1: int, width_px: int, ranks: list[int] | None = None) -> dict[str, Any]:
    """Summary lanes of ``ranks`` (all by default) over [t0, t1) (run clock, ns).

    Returns ``start_ns``/``end_ns`` (relative to the run's origin), ``bins``, ``bin_ns`` and ``ranks``: one
    dict per rank with ``rank``, ``busy`` and ``comm`` (integer percent of each bin, left to right) and
    ``busy_frac``/``comm_frac`` over the whole window. Raises ValueError for an empty window."""
    if t1 <= t0:
        raise ValueError("the window is empty: end_ns must be greater than start_ns")
    sets = rank_sets(index)
    chosen = [r for r in (sorted(sets.work) if ranks is None else ranks) if r in sets.work]
    bins = summary_bins(width_px, len(chosen))
    edges = np.linspace(t0, t1, bins + 1).round().astype(np.int64)
    a, b = edges[:-1], edges[1:]
    size = np.maximum(b - a, 1).astype(np.float64)
    whole_a, whole_b = np.asarray([t0]), np.asarray([t1])
    out = []
    for r in chosen:  # one loop per rank, vectorized over bins
        work, comm = sets.work[r], sets.comm[r]
        both = iv.union(np.concatenate([work.starts, comm.starts]), np.concatenate([work.ends, comm.ends]))
        c = comm.measure_in(a, b)
        busy = both.measure_in(a, b) - c
        total_c = float(comm.measure_in(whole_a, whole_b)[0])
        total_both = float(both.measure_in(whole_a, whole_b)[0])
        out.append(
            {
                "rank": r,
                "busy": np.rint(100 * busy / size).astype(np.int64).tolist(),
                "comm": np.rint(100 * c / size).astype(np.int64).tolist(),
                "busy_frac": (total_both - total_c) / (t1 - t0),
                "comm_frac": total_c / (t1 - t0),
            }
        )
    o = index.origin_ns
    return {"start_ns": t0 - o, "end_ns": t1 - o, "bins": bins, "bin_ns": (t1 - t0) / bins, "ranks": out}


def step_grid(steps: pd.DataFrame, start_ns: np.ndarray, end_ns: np.ndarray) -> dict[str, Any]:
    """The rank x step grid of a rank_steps() frame whose rows are the step windows ``[start_ns, end_ns)``
    (run clock). Returns ``ranks``, ``steps`` (at most MAX_GRID_STEPS, evenly spaced) and matrices
    (one row per rank, one column per step; None where a rank has no such step): ``step_time_ns``,
    ``wait_ns`` (time in collectives waiting for later ranks), ``start_ns``, ``end_ns``."""
    if not len(steps):
        return {}
    frame = steps[["rank", "step", "step_time_ns", "wait_ns"]].assign(start_ns=start_ns, end_ns=end_ns)
    all_steps = np.unique(frame["step"].to_numpy())
    if len(all_steps) > MAX_GRID_STEPS:
        all_steps = all_steps[np.linspace(0, len(all_steps) - 1, MAX_GRID_STEPS).round().astype(np.int64)]
        frame = frame[frame["step"].isin(all_steps)]
    frame = frame.drop_duplicates(["rank", "step"])
    out: dict[str, Any] = {"ranks": sorted(int(r) for r in frame["rank"].unique()), "steps": all_steps.tolist()}
    for col in ("step_time_ns", "wait_ns", "start_ns", "end_ns"):
        m = frame.pivot(index="rank", columns="step", values=col).reindex(index=out["ranks"], columns=all_steps)
        values = m.to_numpy(dtype=np.float64)
        out[col] = [[None if np.isnan(v) else int(v) for v in row] for row in values]
    return out
