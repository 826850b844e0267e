"""Synthetic data-parallel jobs for benchmarks: one Trace (or file) per rank, each on its own host clock.

Each rank is a :func:`collector.synthetic.synthetic_trace` run (``naive`` pattern by default: the host waits
for the GPU at ``loss.item()`` every step, so steps do not pile up on the GPU; its own seed) plus a
NCCL comm-stream lane holding a barrier before the first step and one all_reduce at the end of every step.
A collective is synchronous: every rank enters it when its step's work (host and GPU) ends and all leave together
``latency_ns`` after the last one entered; the next step starts then, so the wait is inside the step (as in
DDP). ``ranks_per_host`` ranks share a host and its clock; each host's
clock is off by up to ``max_offset_ns`` (what merge's alignment must undo). ``slow_rank`` enters every
all_reduce ``delay_ns`` late.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from collector.model import Lane, LaneKind, Trace, conform_intervals, conform_markers
from collector.synthetic import synthetic_trace

COMM_STREAM = 21
ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
BARRIER = "nccl:barrier"
AFTER_NS = 20_000
"""Host time between leaving a step's all_reduce and the next step (the step ends there), ns."""


def rank_job(
    world: int,
    intervals_per_rank: int,
    *,
    steps: int = 20,
    ranks_per_host: int = 8,
    max_offset_ns: int = 500_000,
    latency_ns: int = 300_000,
    slow_rank: int = -1,
    delay_ns: int = 0,
    seed: int = 0,
    pattern: str = "naive",
) -> list[Trace]:
    """``world`` single-rank traces of about ``intervals_per_rank`` intervals each (see the module doc)."""
    if world < 2 or intervals_per_rank < 1 or steps < 1:
        raise ValueError("a rank job needs at least two ranks, one interval and one step")
    rng = np.random.default_rng(seed)
    host_offset = rng.integers(-max_offset_ns, max_offset_ns + 1, (world + ranks_per_host - 1) // ranks_per_host)
    base = [
        synthetic_trace(intervals_per_rank, steps=steps, seed=seed * 100_003 + r, pattern=pattern) for r in range(world)
    ]
    marks = [t.markers.sort_values("step") for t in base]
    step_start = np.stack([m["start_ns"].to_numpy(np.int64)[:steps] for m in marks])
    step_end = np.stack([_work_end(t, m, steps) for t, m in zip(base, marks, strict=True)])
    late = np.where(np.arange(world) == slow_rank, delay_ns, 0)
    first = step_start[:, 0] - 200_000
    bar_leave = int(first.max()) + latency_ns
    # each rank's step s moves by shift[:, s]: it starts when the previous all_reduce let every rank go
    shift = np.zeros((world, steps), np.int64)
    shift[:, 0] = bar_leave + AFTER_NS - step_start[:, 0]
    enter = np.zeros((world, steps), np.int64)
    leave = np.zeros(steps, np.int64)
    for k in range(steps):  # one iteration per step, vectorised over ranks
        enter[:, k] = step_end[:, k] + shift[:, k] + late
        leave[k] = enter[:, k].max() + latency_ns
        if k + 1 < steps:
            shift[:, k + 1] = leave[k] + AFTER_NS - step_start[:, k + 1]
    out = []
    for r, t in enumerate(base):
        offset = int(host_offset[r // ranks_per_host])
        merged = _with_comm(t, r, world, shift[r], enter[r], leave, int(first[r]), bar_leave, offset)
        out.append(replace(merged, meta=replace(merged.meta, host=f"node{r // ranks_per_host:03d}")))
    return out


def _work_end(t: Trace, marks: pd.DataFrame, steps: int) -> np.ndarray:
    """Per step: when the rank's work ends, host or GPU (the all_reduce queues behind the step's kernels), ns."""
    f = t.intervals
    gpu = f[f["step"].to_numpy() >= 0].groupby("step")["end_ns"].max()
    host = marks["end_ns"].to_numpy(np.int64)[:steps]
    return np.maximum(host, gpu.reindex(np.arange(steps), fill_value=0).to_numpy(np.int64))


def _with_comm(
    t: Trace,
    r: int,
    world: int,
    shift: np.ndarray,
    enter: np.ndarray,
    leave: np.ndarray,
    bar_in: int,
    bar_out: int,
    offset: int,
) -> Trace:
    lanes = tuple(Lane(r, ln.kind, ln.ident, ln.label.replace("rank 0", f"rank {r}")) for ln in t.lanes)
    comm = Lane(r, LaneKind.COMM_STREAM, COMM_STREAM, f"rank {r} stream {COMM_STREAM} (nccl)")
    n = len(enter)
    coll = pd.DataFrame(
        {
            "id": np.arange(n + 1, dtype=np.int64) + int(t.intervals["id"].max()) + 1,
            "rank": r,
            "lane": len(lanes),
            "lane_kind": LaneKind.COMM_STREAM.value,
            "stream": COMM_STREAM,
            "lane_label": comm.label,
            "kind": "collective",
            "name": [BARRIER, *[ALL_REDUCE] * n],
            "start_ns": np.concatenate([[bar_in], enter]),
            "end_ns": np.concatenate([[bar_out], leave]),
            "bytes": np.concatenate([[0], np.full(n, 100 << 20)]),
            "step": np.concatenate([[-1], np.arange(n)]),
            "memory_kind": "",
            "non_blocking": False,
            "source": "",
            "cause": "",
            "launch_id": -1,
        }
    )
    f = t.intervals.copy()
    for col in ("lane_label", "name", "source", "cause", "kind", "lane_kind", "memory_kind"):
        f[col] = f[col].astype(str)
    f["lane_label"] = f["lane_label"].str.replace("rank 0", f"rank {r}")
    f["rank"] = r
    by = shift[np.clip(f["step"].to_numpy(np.int64), 0, n - 1)]
    for col in ("start_ns", "end_ns"):
        f[col] = f[col].to_numpy(np.int64) + by
    frame = pd.concat([f, coll], ignore_index=True)
    for col in ("start_ns", "end_ns"):
        frame[col] = frame[col].to_numpy(np.int64) + offset
    m = t.markers.sort_values("step").reset_index(drop=True).iloc[:n].copy()
    m["rank"] = r
    m["start_ns"] = m["start_ns"].to_numpy(np.int64) + shift + offset
    m["end_ns"] = leave + AFTER_NS + offset
    meta = replace(t.meta, world_size=world, notes={**(t.meta.notes or {}), "rank": r})
    return Trace(meta, (*lanes, comm), conform_intervals(frame), conform_markers(m))


def write_rank_files(traces: list[Trace], folder: Path, stem: str = "run") -> list[Path]:
    """Write each rank's trace as ``<stem>.rank<R>.json.gz`` under ``folder``; returns the paths in rank order."""
    from collector.traceformat.write import write_trace

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, t in enumerate(traces):
        path = folder / f"{stem}.rank{r}.json.gz"
        write_trace(t, str(path))
        paths.append(path)
    return paths
