"""What happened in one time range of a run: the numbers the timeline's range selection shows.

Computed from the level-of-detail index's per-lane arrays (no full run read), with the same definitions
as the per-step metrics (webapp.analysis.metrics), measured inside the range: every interval is clipped to
[t0, t1) and unions are taken per rank, then summed over the ranks shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collector.model import COPY_KINDS, IntervalKind
from webapp.analysis import intervals as iv
from webapp.analysis.lod import KIND_NAMES, RunIndex, window_slice

TOP_OPS = 10
_COPY = np.asarray([KIND_NAMES.index(k.value) for k in COPY_KINDS])
_COMPUTE = np.asarray([KIND_NAMES.index(k.value) for k in (IntervalKind.KERNEL, IntervalKind.MEMSET)])
_GPU = np.asarray([*_COPY, *_COMPUTE, KIND_NAMES.index(IntervalKind.COLLECTIVE.value)])
_SYNC = KIND_NAMES.index(IntervalKind.SYNC_WAIT.value)


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
    """RangeStats of [t0, t1) over ``lanes`` (all by default). Raises ValueError for an empty range."""
    if t1 <= t0:
        raise ValueError("the range is empty: end_ns must be greater than start_ns")
    chosen = list(range(len(index.lanes))) if lanes is None else lanes
    per_rank: dict[int, dict[str, list[np.ndarray]]] = {}
    rows_all = []
    for lane in chosen:
        lo, hi = index.lane_bounds[lane]
        i0, i1 = window_slice(index.start[lo:hi], index.cummax[lo:hi], t0, t1)
        rows = np.arange(lo + i0, lo + i1)
        rows = rows[index.end[rows] > t0] if len(rows) else rows
        rows_all.append(rows)
        parts = per_rank.setdefault(index.lanes[lane].rank, {k: [] for k in ("gpu", "compute", "copy", "sync")})
        k = index.kind[rows]
        for name, mask in (
            ("gpu", np.isin(k, _GPU)),
            ("compute", np.isin(k, _COMPUTE)),
            ("copy", np.isin(k, _COPY)),
            ("sync", k == _SYNC),
        ):
            parts[name].append(rows[mask])
    totals = dict.fromkeys(("gpu", "compute", "copy", "overlap", "sync"), 0)
    for parts in per_rank.values():
        seg = {name: _clipped_union(index, np.concatenate(rows), t0, t1) for name, rows in parts.items()}
        for name in ("gpu", "compute", "copy", "sync"):
            totals[name] += seg[name].total
        totals["overlap"] += iv.intersect(seg["copy"], seg["compute"]).total
    rows = np.concatenate(rows_all) if rows_all else np.zeros(0, np.int64)
    return RangeStats(
        start_ns=t0,
        end_ns=t1,
        ranks=len(per_rank),
        gpu_busy_ns=totals["gpu"],
        compute_busy_ns=totals["compute"],
        transfer_busy_ns=totals["copy"],
        copy_compute_overlap_ns=totals["overlap"],
        exposed_copy_ns=totals["copy"] - totals["overlap"],
        sync_wait_ns=totals["sync"],
        intervals=len(rows),
        top_ops=_top_ops(index, rows, t0, t1),
    )


def _clipped_union(index: RunIndex, rows: np.ndarray, t0: int, t1: int) -> iv.Segments:
    return iv.union(np.maximum(index.start[rows], t0), np.minimum(index.end[rows], t1))


def _top_ops(index: RunIndex, rows: np.ndarray, t0: int, t1: int) -> list[dict[str, Any]]:
    """The TOP_OPS (kind, name) pairs with the most clipped time in the range (annotations left out)."""
    rows = rows[index.kind[rows] != KIND_NAMES.index(IntervalKind.ANNOTATION.value)]
    if not len(rows):
        return []
    dur = np.minimum(index.end[rows], t1) - np.maximum(index.start[rows], t0)
    key = index.columns.name[rows].astype(np.int64) * len(KIND_NAMES) + index.kind[rows]
    uniq, inv = np.unique(key, return_inverse=True)
    total = np.bincount(inv, weights=dur.astype(np.float64), minlength=len(uniq)).astype(np.int64)
    count = np.bincount(inv, minlength=len(uniq))
    best = np.argsort(-total, kind="stable")[:TOP_OPS]
    cats = index.columns.name_cats
    out = []
    for i in best:
        code = int(uniq[i] // len(KIND_NAMES))
        out.append(
            {
                "kind": KIND_NAMES[int(uniq[i] % len(KIND_NAMES))],
                "name": str(cats[code]) if code >= 0 else "",
                "count": int(count[i]),
                "total_ns": int(total[i]),
            }
        )
    return out
