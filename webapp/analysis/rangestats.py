"""What happened in one time range of a run: the numbers the timeline's range selection shows.

Computed from the level-of-detail index's per-lane arrays (no full run read), with the same definitions
as the per-step metrics (webapp.analysis.metrics), measured inside the range: every interval is clipped to
[t0, t1) and unions are taken per rank, then summed over the ranks shown. Each rank's unions are built once
over the whole run with prefix sums of their lengths, so a range of any width is measured by binary search;
the interval count and the top ops read the rows that overlap the range (vectorized, no sort).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collector.model import COPY_KINDS, KIND_CODE, KIND_NAMES, IntervalKind
from webapp.analysis import intervals as iv
from webapp.analysis.lod import RunIndex, window_slice
from webapp.analysis.perindex import PerIndex

TOP_OPS = 10
_COPY = np.asarray([KIND_CODE[k] for k in COPY_KINDS])
_COMPUTE = np.asarray([KIND_CODE[k] for k in (IntervalKind.KERNEL, IntervalKind.MEMSET)])
_GPU = np.asarray([*_COPY, *_COMPUTE, KIND_CODE[IntervalKind.COLLECTIVE]])
_SYNC = KIND_CODE[IntervalKind.SYNC_WAIT]


@dataclass(frozen=True)
class RangeStats:
    """Stats of [start_ns, end_ns) (run clock), all ns: ``gpu_busy_ns`` (union of GPU intervals per rank),
    ``compute_busy_ns`` (kernels, memsets), ``transfer_busy_ns`` (copies), ``copy_compute_overlap_ns``,
    ``exposed_copy_ns`` (copy time with no compute), ``sync_wait_ns`` (union of host sync waits per rank),
    ``intervals`` (count overlapping the range) and ``top_ops``: the ops with most time inside the range
    (``kind``, ``name``, ``count``, ``total_ns``), biggest first."""

    start_ns: int
    end_ns: int
    ranks: int
    gpu_busy_ns: int = 0
    compute_busy_ns: int = 0
    transfer_busy_ns: int = 0
    copy_compute_overlap_ns: int = 0
    exposed_copy_ns: int = 0
    sync_wait_ns: int = 0
    intervals: int = 0
    top_ops: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self, origin_ns: int = 0) -> dict[str, Any]:
        """JSON-ready; times ``start_ns``/``end_ns`` relative to ``origin_ns``; fractions added:
        ``gpu_busy_frac`` (of the range times the ranks), ``copy_compute_overlap_frac`` (of transfer busy,
        None without copies)."""
        span = max(1, self.end_ns - self.start_ns) * max(1, self.ranks)
        out = dict(self.__dict__)
        out["start_ns"], out["end_ns"] = self.start_ns - origin_ns, self.end_ns - origin_ns
        out["gpu_busy_frac"] = self.gpu_busy_ns / span
        t = self.transfer_busy_ns
        out["copy_compute_overlap_frac"] = self.copy_compute_overlap_ns / t if t > 0 else None
        return out


def range_stats(index: RunIndex, t0: int, t1: int, lanes: list[int] | None = None) -> RangeStats:
    """RangeStats of [t0, t1) over ``lanes`` (all by default). Raises ValueError for an empty range.

    The busy times come from each rank's prefix sums (:func:`busy_sets`, built once per index), so any
    range costs a few binary searches; only lanes that cover part of a rank are clipped and unioned here.
    """
    if t1 <= t0:
        raise ValueError("the range is empty: end_ns must be greater than start_ns")
    chosen = list(range(len(index.lanes))) if lanes is None else lanes
    by_rank: dict[int, list[int]] = {}
    for lane in chosen:
        by_rank.setdefault(index.lanes[lane].rank, []).append(lane)
    whole = busy_sets(index)
    totals = dict.fromkeys(BUSY_SETS, 0)
    rows_all = []
    for rank, rank_lanes in by_rank.items():
        rows = [_rows_in(index, lane, t0, t1) for lane in rank_lanes]
        rows_all += rows
        if set(rank_lanes) == set(whole.lanes.get(rank, ())):
            sets = whole.by_rank[rank]
            for name in BUSY_SETS:
                totals[name] += int(sets[name].measure_in(np.asarray([t0]), np.asarray([t1]))[0])
        else:
            clipped = _rank_sets(index, np.concatenate(rows), t0, t1)
            for name in BUSY_SETS:
                totals[name] += clipped[name].total
    rows_cat = np.concatenate(rows_all) if rows_all else np.zeros(0, np.int64)
    return RangeStats(
        start_ns=t0,
        end_ns=t1,
        ranks=len(by_rank),
        gpu_busy_ns=totals["gpu"],
        compute_busy_ns=totals["compute"],
        transfer_busy_ns=totals["copy"],
        copy_compute_overlap_ns=totals["overlap"],
        exposed_copy_ns=totals["copy"] - totals["overlap"],
        sync_wait_ns=totals["sync"],
        intervals=len(rows_cat),
        top_ops=_top_ops(index, rows_cat, t0, t1),
    )


BUSY_SETS = ("gpu", "compute", "copy", "overlap", "sync")
"""The sets of time a range measures per rank; ``overlap`` is copy and compute at once."""


@dataclass(frozen=True)
class BusySets:
    """Per rank, the whole run's BUSY_SETS as Segments (sorted, disjoint, with prefix sums of their
    lengths, ns); ``lanes[rank]`` are the lanes they were built from."""

    by_rank: dict[int, dict[str, iv.Segments]]
    lanes: dict[int, tuple[int, ...]]


_busy: PerIndex[BusySets] = PerIndex()


def busy_sets(index: RunIndex) -> BusySets:
    """The run's BusySets, built on first use (one pass over the index's arrays) and kept as long as the
    index is alive."""
    return _busy.get(index, lambda: _build_busy_sets(index))


def _build_busy_sets(index: RunIndex) -> BusySets:
    """Each lane's sets first (its rows are sorted by start: no sort), then the union of a rank's lanes."""
    parts: dict[int, dict[str, list[iv.Segments]]] = {}
    lanes: dict[int, list[int]] = {}
    for lane, (lo, hi) in enumerate(index.lane_bounds):
        rank = index.lanes[lane].rank
        lanes.setdefault(rank, []).append(lane)
        per = parts.setdefault(rank, {name: [] for name in ("gpu", "compute", "copy", "sync")})
        s, e, k = index.start[lo:hi], index.end[lo:hi], index.kind[lo:hi]
        for name, table in _TABLES.items():
            mask = table[k]
            if mask.any():
                per[name].append(iv.union(s[mask], e[mask]))
    by_rank = {}
    for rank, per in parts.items():
        sets = {name: _merge(segs) for name, segs in per.items()}
        sets["overlap"] = iv.intersect(sets["copy"], sets["compute"])
        by_rank[rank] = sets
    return BusySets(by_rank, {r: tuple(ls) for r, ls in lanes.items()})


def _merge(segs: list[iv.Segments]) -> iv.Segments:
    if not segs:
        return iv.empty()
    if len(segs) == 1:
        return segs[0]
    return iv.union(np.concatenate([s.starts for s in segs]), np.concatenate([s.ends for s in segs]))


def _kind_table(codes: np.ndarray) -> np.ndarray:
    table = np.zeros(len(KIND_NAMES), dtype=bool)
    table[codes] = True
    return table


_TABLES = {
    "gpu": _kind_table(_GPU),
    "compute": _kind_table(_COMPUTE),
    "copy": _kind_table(_COPY),
    "sync": _kind_table(np.asarray([_SYNC])),
}


def _rows_in(index: RunIndex, lane: int, t0: int, t1: int) -> np.ndarray:
    """Rows of ``lane`` that overlap [t0, t1)."""
    lo, hi = index.lane_bounds[lane]
    i0, i1 = window_slice(index.start[lo:hi], index.cummax[lo:hi], t0, t1)
    if i1 <= i0:
        return np.zeros(0, np.int64)
    ends = index.end[lo + i0 : lo + i1]
    return lo + i0 + np.flatnonzero(ends > t0)


def _rank_sets(index: RunIndex, rows: np.ndarray, t0: int, t1: int) -> dict[str, iv.Segments]:
    """BUSY_SETS of ``rows`` clipped to [t0, t1) (for a part of a rank's lanes)."""
    k = index.kind[rows]
    s, e = np.maximum(index.start[rows], t0), np.minimum(index.end[rows], t1)
    out = {name: iv.union(s[table[k]], e[table[k]]) for name, table in _TABLES.items()}
    out["overlap"] = iv.intersect(out["copy"], out["compute"])
    return out


def _top_ops(index: RunIndex, rows: np.ndarray, t0: int, t1: int) -> list[dict[str, Any]]:
    """The TOP_OPS (kind, name) pairs with the most clipped time in the range (annotations left out)."""
    rows = rows[index.kind[rows] != KIND_CODE[IntervalKind.ANNOTATION]]
    if not len(rows):
        return []
    dur = np.minimum(index.end[rows], t1) - np.maximum(index.start[rows], t0)
    nk = len(KIND_NAMES)
    key = (index.columns.name[rows].astype(np.int64) + 1) * nk + index.kind[rows]  # name -1 (none) -> 0
    size = (len(index.columns.name_cats) + 1) * nk
    total = np.bincount(key, weights=dur.astype(np.float64), minlength=size).astype(np.int64)
    count = np.bincount(key, minlength=size)
    present = np.flatnonzero(count)
    best = present[np.argsort(-total[present], kind="stable")[:TOP_OPS]]
    cats = index.columns.name_cats
    out = []
    for key_i in best:
        code = int(key_i // nk) - 1
        out.append(
            {
                "kind": KIND_NAMES[int(key_i % nk)],
                "name": str(cats[code]) if code >= 0 else "",
                "count": int(count[key_i]),
                "total_ns": int(total[key_i]),
            }
        )
    return out
