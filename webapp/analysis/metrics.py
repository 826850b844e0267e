"""Metrics per step, per rank and per run, and the per-op table.

Definitions (all over the step windows; a rank without ``step`` markers is one step, its whole span):

- GPU busy: union of every GPU interval (kernels, memsets, copies, collectives) over all streams.
- compute busy: union of kernels and memsets; transfer busy: union of copies (``copy`` for short).
- copy/compute overlap: time a copy and a compute interval run at once; ``copy_compute_overlap_frac`` is
  that over transfer busy time. Exposed copy: transfer busy time with no compute running.
- GPU idle = step time - GPU busy.
- Critical path: each step's time split by what it waited on, walked back through the replayed dependency
  graph (webapp.analysis.causal.critical): ``cp_host`` the host's own work, ``cp_launch`` launch latency,
  ``cp_compute``/``cp_copy``/``cp_comm`` GPU work, ``cp_sync`` waits' own time and wake-ups, ``cp_other``
  what the graph does not know. The parts add up to the step time. Run-level ``cp_<part>_step_median_ns``
  split the median step by each part's share of the path over all replayed steps, so they add up to it; a
  rank's split its own median step by its own steps' path.
- Queue depth: GPU ops of the rank launched and not yet finished (webapp.analysis.queue); per step its
  time-weighted median over the window.
- Interval counts and sums (sync waits, copy bytes) go to the step whose window holds their start.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from collector.importers.collectives import is_host_collective
from collector.model import GPU_KINDS, INTERVAL_KIND_DTYPE, IntervalKind
from webapp.analysis import intervals as iv
from webapp.analysis.causal.critical import PARTS
from webapp.analysis.context import RunData, kind_mask
from webapp.analysis.queue import enqueue_times, median_depth

MIN_BANDWIDTH_BYTES = 1 << 20
"""Copies smaller than 1 MiB are latency-bound; they are left out of achieved-bandwidth figures."""

PER_STEP_COLUMNS: dict[str, str] = {
    "rank": "distributed rank",
    "step": "step index (0 for a rank without step markers)",
    "start_ns": "step start, ns on the run clock",
    "end_ns": "step end, ns on the run clock",
    "step_time_ns": "end_ns - start_ns, ns",
    "gpu_busy_ns": "union of GPU intervals over all streams, ns",
    "compute_busy_ns": "union of kernels and memsets, ns",
    "transfer_busy_ns": "union of copies, ns",
    "copy_compute_overlap_ns": "time a copy and a kernel run at once, ns",
    "exposed_copy_ns": "copy time with no kernel running, ns",
    "copy_compute_overlap_frac": "copy_compute_overlap_ns / transfer_busy_ns (NaN without copies)",
    "gpu_busy_frac": "gpu_busy_ns / step_time_ns",
    "gpu_idle_ns": "step_time_ns - gpu_busy_ns, ns",
    "cp_host_ns": "critical path: the host's own work (Python, framework, CUDA calls), ns",
    "cp_launch_ns": "critical path: launch latency (a launch call's return to its GPU op's start, idle stream), ns",
    "cp_compute_ns": "critical path: kernels and memsets, ns",
    "cp_copy_ns": "critical path: copies, ns",
    "cp_comm_ns": "critical path: collectives, ns",
    "cp_sync_ns": "critical path: waits' own time and their wake-up after the GPU work they waited for, ns",
    "cp_other_ns": "critical path: time the dependency graph cannot attribute, ns",
    "host_issue_ns": "host busy in launch/cpu_op and not waiting in a sync, ns",
    "host_busy_ns": "union of the host's launch, cpu_op and sync_wait intervals, ns",
    "collective_ns": "union of collectives (NCCL kernels, or gloo's on its threads), ns",
    "sync_wait_count": "sync_wait intervals starting in the step",
    "sync_wait_ns": "host time waiting in syncs within the step (a wait that outlasts it counts to its end), ns",
    "copy_count": "copies starting in the step",
    "copy_ns": "their summed duration (parallel copies count twice), ns",
    "copy_bytes": "their bytes",
    "pageable_copy_count": "copies from/to pageable host memory",
    "pageable_copy_bytes": "their bytes",
    "pageable_copy_ns": "their summed duration, ns",
    "queue_depth_median": "time-weighted median of the rank's GPU ops launched and not finished (NaN: empty step)",
}

STAT_COLUMNS = (
    "step_time",
    "gpu_busy",
    "compute_busy",
    "transfer_busy",
    "exposed_copy",
    "gpu_idle",
    "sync_wait",
    "host_busy",
    "collective",
)
"""Per-step ``<name>_ns`` columns that get run-level median and p90 (``<name>_step_median_ns`` etc.). The
critical path's parts get the split of the median step instead (:func:`_path_of_median_step`): a median or p90
of each part alone would not add up to any step."""


def _by_window(rd: RunData, rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Sum of ``weights`` (or count) of the intervals at ``rows`` (a mask or positions) per window, by window
    of their start."""
    w = rd.win_row[rows]
    ok = w >= 0
    vals = None if weights is None else weights[ok].astype(np.float64)
    return np.bincount(w[ok], weights=vals, minlength=len(rd.win)).astype(np.int64)


def queue_depth_median(rd: RunData) -> np.ndarray:
    """Per step window: time-weighted median count of the rank's GPU ops queued and unfinished, over all
    its streams (an op is queued from min(launch end, GPU start) to its GPU end)."""
    gpu = np.flatnonzero(rd.gpu_mask)
    enqueue_ns = np.empty(len(gpu), dtype=np.int64)
    for a in range(0, len(gpu), iv.CHUNK_ROWS):  # a block at a time: no run-long temporaries
        ops = gpu[a : a + iv.CHUNK_ROWS]
        enqueue_ns[a : a + len(ops)] = enqueue_times(rd.s[ops], rd.rows_of_ids(rd.ints("launch_id", ops)), rd.e)
    return median_depth(enqueue_ns, rd.e[gpu], rd.win.starts, rd.win.ends)


def per_step_frame(rd: RunData, critical: np.ndarray) -> pd.DataFrame:
    """One row per (rank, step) with the columns of :data:`PER_STEP_COLUMNS` (times int64 ns);
    ``critical`` holds the critical-path ns per window and part (webapp.analysis.causal.critical.PARTS)."""
    a, b = rd.win.starts, rd.win.ends
    step_time = b - a
    gpu = rd.gpu.measure_in(a, b)
    comp = rd.compute.measure_in(a, b)
    xfer = rd.copy.measure_in(a, b)
    overlap = iv.intersect(rd.copy, rd.compute).measure_in(a, b)
    sync_t = rd.sync.measure_in(a, b)
    host = rd.host.measure_in(a, b)
    coll = kind_mask(rd.kind, IntervalKind.COLLECTIVE)
    collective = iv.union(rd.s[coll], rd.e[coll]).measure_in(a, b)
    idle = step_time - gpu
    copies = np.flatnonzero(rd.copy_mask)  # their durations only: a run-long one would be fresh memory
    copy_ns, copy_bytes = rd.e[copies] - rd.s[copies], rd.ints("bytes", copies)
    page = rd.mem[copies] == rd.mem_code("pageable")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = pd.DataFrame(
            {
                "rank": rd.win_rank,
                "step": rd.win_step,
                "start_ns": rd.win_start_ns,
                "end_ns": rd.win_start_ns + step_time,
                "step_time_ns": step_time,
                "gpu_busy_ns": gpu,
                "compute_busy_ns": comp,
                "transfer_busy_ns": xfer,
                "copy_compute_overlap_ns": overlap,
                "exposed_copy_ns": xfer - overlap,
                "copy_compute_overlap_frac": np.where(xfer > 0, overlap / np.maximum(xfer, 1), np.nan),
                "gpu_busy_frac": np.where(step_time > 0, gpu / np.maximum(step_time, 1), np.nan),
                "gpu_idle_ns": idle,
                **{f"cp_{part}_ns": critical[:, i] for i, part in enumerate(PARTS)},
                "host_issue_ns": host - sync_t,
                "host_busy_ns": host,
                "collective_ns": collective,
                "sync_wait_count": _by_window(rd, rd.sync_mask),
                "sync_wait_ns": sync_t,
                "copy_count": _by_window(rd, copies),
                "copy_ns": _by_window(rd, copies, copy_ns),
                "copy_bytes": _by_window(rd, copies, copy_bytes),
                "pageable_copy_count": _by_window(rd, copies[page]),
                "pageable_copy_bytes": _by_window(rd, copies[page], copy_bytes[page]),
                "pageable_copy_ns": _by_window(rd, copies[page], copy_ns[page]),
                "queue_depth_median": queue_depth_median(rd),
            }
        )
    return out.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)


_SUMMED = [c for c in PER_STEP_COLUMNS if c.endswith(("_ns", "_count", "_bytes")) and c not in ("start_ns", "end_ns")]


def _fracs(frame: pd.DataFrame) -> pd.DataFrame:
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["copy_compute_overlap_frac"] = np.where(
            frame["transfer_busy_ns"] > 0, frame["copy_compute_overlap_ns"] / frame["transfer_busy_ns"], np.nan
        )
        frame["gpu_busy_frac"] = np.where(
            frame["step_time_ns"] > 0, frame["gpu_busy_ns"] / frame["step_time_ns"], np.nan
        )
    return frame


def per_rank_frame(per_step: pd.DataFrame) -> pd.DataFrame:
    """One row per rank: ``steps``, ``step_time_median_ns``, ``step_time_p90_ns``, the rank's own median of
    each other STAT_COLUMNS entry (``<name>_step_median_ns``, as the run's metric of that name), the rank's
    median step split by its own critical path (``cp_<part>_step_median_ns``, ns, as the run's: NaN for a rank
    without a replayed step) and the per-step sums (same names and units as :data:`PER_STEP_COLUMNS`, summed
    over the rank's steps), fractions recomputed."""
    g = per_step.groupby("rank", sort=True)
    out = g[_SUMMED].sum()
    out.insert(0, "steps", g.size())
    out.insert(1, "step_time_median_ns", g["step_time_ns"].median())
    out.insert(2, "step_time_p90_ns", g["step_time_ns"].quantile(0.9))
    for name in STAT_COLUMNS[1:]:
        out[f"{name}_step_median_ns"] = g[f"{name}_ns"].median()
    out = out.join(_path_of_median_step_by_rank(per_step, out["step_time_median_ns"]))
    return _fracs(out.reset_index())


def _bandwidth(rd: RunData, memory: str) -> tuple[float, float]:
    """Achieved H2D bandwidth (GB/s) and bytes over copies >= MIN_BANDWIDTH_BYTES of that memory kind."""
    rows = np.flatnonzero(rd.copy_mask)
    nbytes = rd.ints("bytes", rows)
    m = (rd.kind[rows] == rd.code(IntervalKind.MEMCPY_H2D)) & (rd.mem[rows] == rd.mem_code(memory))
    m &= nbytes >= MIN_BANDWIDTH_BYTES
    total_b, total_t = float(nbytes[m].sum()), float((rd.e[rows] - rd.s[rows])[m].sum())
    return (total_b / total_t if total_t > 0 else math.nan), total_b


def run_metrics(rd: RunData, per_step: pd.DataFrame) -> dict[str, float]:
    """Run-level metrics: per-step sums over all ranks and steps, fractions of those sums, median and p90
    of the STAT_COLUMNS over all (rank, step) rows, counts, and copy bandwidths in GB/s (1e9 bytes/s):
    ``h2d_<memory>_achieved_gbps``, ``h2d_<memory>_probe_gbps`` (from meta.bandwidth_probe, NaN if absent)
    and ``h2d_pinned_vs_probe_frac``."""
    m: dict[str, float] = {
        "ranks": float(len(rd.trace.ranks) or per_step["rank"].nunique()),
        "steps": float(per_step.groupby("rank").size().max()) if len(per_step) else 0.0,
        "intervals": float(len(rd.trace.intervals)),
    }
    for name in _SUMMED:
        m[name] = float(per_step[name].sum())
    for name in STAT_COLUMNS:
        values = per_step[f"{name}_ns"]
        prefix = name if name == "step_time" else f"{name}_step"
        m[f"{prefix}_median_ns"] = float(values.median()) if len(values) else math.nan
        m[f"{prefix}_p90_ns"] = float(values.quantile(0.9)) if len(values) else math.nan
    if not kind_mask(rd.kind, IntervalKind.COLLECTIVE).any():  # a run without collectives has no such figure
        m["collective_step_median_ns"] = m["collective_step_p90_ns"] = math.nan
    m.update(_path_of_median_step(per_step, m["step_time_median_ns"]))
    depth = per_step["queue_depth_median"].dropna()
    m["queue_depth_step_median"] = float(depth.median()) if len(depth) else math.nan
    span = m["step_time_ns"]
    m["gpu_busy_frac"] = m["gpu_busy_ns"] / span if span > 0 else math.nan
    m["copy_compute_overlap_frac"] = (
        m["copy_compute_overlap_ns"] / m["transfer_busy_ns"] if m["transfer_busy_ns"] > 0 else math.nan
    )
    probe = rd.trace.meta.bandwidth_probe or {}
    for memory in ("pinned", "pageable"):
        gbps, _ = _bandwidth(rd, memory)
        m[f"h2d_{memory}_achieved_gbps"] = gbps
        value = probe.get(f"h2d_{memory}_gbps")
        m[f"h2d_{memory}_probe_gbps"] = float(value) if isinstance(value, (int, float)) and value > 0 else math.nan
    m["h2d_pinned_vs_probe_frac"] = m["h2d_pinned_achieved_gbps"] / m["h2d_pinned_probe_gbps"]
    return m


_PATH_COLUMNS = [f"cp_{part}_ns" for part in PARTS]


def _path_of_median_step(per_step: pd.DataFrame, median_ns: float) -> dict[str, float]:
    """``cp_<part>_step_median_ns``: the median step split by each part's share of the critical path over the
    steps that have one (a run replayed in blocks leaves the others at 0), so the parts add up to it."""
    sums = _replayed_path(per_step).sum().to_frame().T
    split = _split_by_path(sums, pd.Series([median_ns]))
    return {str(key): float(value) for key, value in split.iloc[0].items()}


def _path_of_median_step_by_rank(per_step: pd.DataFrame, median_ns: pd.Series) -> pd.DataFrame:
    """Per rank (the index of ``median_ns``, each rank's median step in ns): that step split by the rank's own
    critical path, as :func:`_path_of_median_step` splits the run's; NaN for a rank without a replayed step."""
    path = _replayed_path(per_step)
    sums = path.groupby(per_step.loc[path.index, "rank"]).sum().reindex(median_ns.index)
    return _split_by_path(sums, median_ns)


def _replayed_path(per_step: pd.DataFrame) -> pd.DataFrame:
    """The ``cp_<part>_ns`` columns (ns, float) of the steps that have a critical path."""
    path = per_step[_PATH_COLUMNS].astype(np.float64)
    return path[path.sum(axis=1) > 0]


def _split_by_path(path_sums: pd.DataFrame, median_ns: pd.Series) -> pd.DataFrame:
    """Per row: ``median_ns`` (ns) split by each part's share of that row's summed ``cp_<part>_ns``, as columns
    ``cp_<part>_step_median_ns`` (ns); NaN for a row without any path."""
    total = path_sums.sum(axis=1)
    shares = path_sums.div(total.where(total > 0), axis=0)
    return shares.mul(median_ns, axis=0).set_axis([f"cp_{part}_step_median_ns" for part in PARTS], axis=1)


_OpSums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Keys present (sorted), and per key: count, total duration (ns), summed bytes, longest duration (ns)."""


def _op_keys(rd: RunData, names: np.ndarray, n_names: int, rows: slice) -> tuple[np.ndarray, np.ndarray]:
    """The (kind, name) key of each row in ``rows`` that the kernel table counts, and the rows' mask."""
    kind = rd.kind[rows]
    keep = (kind != rd.code(IntervalKind.ANNOTATION)) & (kind != rd.code(IntervalKind.SAMPLE))
    key = kind.astype(np.int64)
    key *= n_names + 1
    key += names[rows]
    key += 1
    return key, keep


def _sums(key: np.ndarray, dur: np.ndarray, nbytes: np.ndarray, size: int) -> list[np.ndarray]:
    """Per key in ``[0, size)``: count, total duration (ns), summed bytes, longest duration (ns). Whole ns and
    bytes: float64 sums are exact below 2**53, so sums of blocks add up to the one sum."""
    mx = np.zeros(size, dtype=np.int64)
    np.maximum.at(mx, key, dur)
    return [
        np.bincount(key, minlength=size),
        np.bincount(key, weights=dur.astype(np.float64), minlength=size).astype(np.int64),
        np.bincount(key, weights=nbytes.astype(np.float64), minlength=size).astype(np.int64),
        mx,
    ]


def _op_sums_dense(rd: RunData, names: np.ndarray, n_names: int, span: int) -> _OpSums:
    """:data:`_OpSums` summed into arrays over the whole key space, iv.CHUNK_ROWS rows at a time."""
    sums = [np.zeros(span, dtype=np.int64) for _ in range(4)]
    nbytes = np.asarray(rd.trace.intervals["bytes"], dtype=np.int64)
    for a in range(0, len(rd.kind), iv.CHUNK_ROWS):
        rows = slice(a, a + iv.CHUNK_ROWS)
        key, keep = _op_keys(rd, names, n_names, rows)
        dur, nb = rd.e[rows] - rd.s[rows], nbytes[rows]
        if not keep.all():
            key, dur, nb = key[keep], dur[keep], nb[keep]
        count, total, bsum, mx = _sums(key, dur, nb, span)
        sums[0] += count
        sums[1] += total
        sums[2] += bsum
        np.maximum(sums[3], mx, out=sums[3])
    uniq = np.flatnonzero(sums[0])
    count, total, bsum, mx = (x[uniq] for x in sums)
    return uniq, count, total, bsum, mx


def _op_sums_sparse(rd: RunData, names: np.ndarray, n_names: int) -> _OpSums:
    """:data:`_OpSums` for a key space too wide for arrays over it (names about as many as rows)."""
    key, keep = _op_keys(rd, names, n_names, slice(None))
    dur = rd.e - rd.s
    nbytes = np.asarray(rd.trace.intervals["bytes"], dtype=np.int64)
    if not keep.all():
        key, dur, nbytes = key[keep], dur[keep], nbytes[keep]
    codes, uniq = pd.factorize(key, sort=True)
    count, total, bsum, mx = _sums(codes.astype(np.int64), dur, nbytes, len(uniq))
    return np.asarray(uniq, dtype=np.int64), count, total, bsum, mx


def kernel_table(rd: RunData) -> pd.DataFrame:
    """Per (kind, name) over the whole run, biggest total first. Columns: ``kind``, ``name``, ``count``,
    ``total_ns``, ``mean_ns``, ``max_ns`` (ns), ``bytes`` (summed), ``gpu_frac`` (total_ns over the run's
    GPU busy time; NaN for host kinds and for collectives a host thread ran, gloo's). Annotations and sampled
    Python stacks (the Host time table's) are left out."""
    names, name_cats = rd.codes_of("name")
    n_names = max(len(name_cats), 1)
    span = len(INTERVAL_KIND_DTYPE.categories) * (n_names + 1)
    if span <= 2 * len(rd.kind) + 4096:  # dense keys: sums over the key space, a block of rows at a time
        uniq, count, total, bsum, mx = _op_sums_dense(rd, names, n_names, span)
    else:
        uniq, count, total, bsum, mx = _op_sums_sparse(rd, names, n_names)
    kind_code, name_code = uniq // (n_names + 1), uniq % (n_names + 1) - 1
    kinds = np.asarray(INTERVAL_KIND_DTYPE.categories, dtype=object)
    name_arr = np.asarray([*name_cats, ""], dtype=object)
    gpu_kinds = np.isin(kind_code, [rd.code(k) for k in GPU_KINDS])
    host_run = (kind_code == rd.code(IntervalKind.COLLECTIVE)) & np.array(
        [is_host_collective(str(nm)) for nm in name_arr[name_code]], dtype=bool
    )
    gpu_kinds &= ~host_run
    busy = rd.gpu.total
    out = pd.DataFrame(
        {
            "kind": kinds[kind_code].astype(str),
            "name": name_arr[name_code].astype(str),
            "count": count.astype(np.int64),
            "total_ns": total,
            "mean_ns": total / np.maximum(count, 1),
            "max_ns": mx,
            "bytes": bsum,
            "gpu_frac": np.where(gpu_kinds & (busy > 0), total / max(busy, 1), np.nan),
        }
    )
    return out.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)
