"""Hand-built traces for the analysis tests: one CPU lane, a compute and a transfer stream per rank."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from collector.model import (
    Interval,
    IntervalKind,
    Lane,
    LaneKind,
    Marker,
    MarkerKind,
    MemoryKind,
    RunMeta,
    Trace,
)

US = 1_000
MS = 1_000_000
CPU, COMPUTE, TRANSFER = 0, 1, 2
PROBE = {"h2d_pinned_gbps": 53.7, "h2d_pageable_gbps": 5.6}


def lanes(ranks: int = 1) -> list[Lane]:
    out: list[Lane] = []
    for r in range(ranks):
        out += [
            Lane(r, LaneKind.CPU_THREAD, 100 + r, "main"),
            Lane(r, LaneKind.COMPUTE_STREAM, 7, "stream 7"),
            Lane(r, LaneKind.TRANSFER_STREAM, 13, "stream 13"),
        ]
    return out


def iv(lane: int, kind: str, start: int, end: int, name: str = "", **kw: Any) -> Interval:
    if "memory_kind" in kw:
        kw["memory_kind"] = MemoryKind(kw["memory_kind"])
    return Interval(lane=lane, kind=IntervalKind(kind), name=name or kind, start_ns=start, end_ns=end, **kw)


def steps(*bounds: tuple[int, int], rank: int = 0) -> list[Marker]:
    return [Marker(rank, MarkerKind.STEP, f"step {i}", s, e, i) for i, (s, e) in enumerate(bounds)]


def trace(intervals: list[Interval], markers: Sequence[Marker] = (), ranks: int = 1, probe: bool = True) -> Trace:
    meta = RunMeta(source="test", bandwidth_probe=dict(PROBE) if probe else {})
    return Trace.build(meta, lanes(ranks), intervals, list(markers))


def pageable_run(n_steps: int = 1) -> Trace:
    """Per 28 ms step: a blocking 64 MiB pageable copy (12 ms), then 16 ms of kernels."""
    rows: list[Interval] = []
    for k in range(n_steps):
        t = k * 28 * MS
        rows += [
            iv(
                CPU,
                "sync_wait",
                t,
                t + 12 * MS + 10 * US,
                "aten::to",
                cause="blocking_copy",
                source="train.py:10",
                id=10 * k,
            ),
            iv(
                COMPUTE,
                "memcpy_h2d",
                t,
                t + 12 * MS,
                "Memcpy HtoD (Pageable -> Device)",
                bytes=64 << 20,
                memory_kind="pageable",
                launch_id=10 * k,
                id=10 * k + 1,
            ),
            iv(CPU, "launch", t + 12 * MS + 10 * US, t + 12 * MS + 15 * US, "cudaLaunchKernel", id=10 * k + 2),
            iv(COMPUTE, "kernel", t + 12 * MS + 20 * US, t + 28 * MS, "gemm", launch_id=10 * k + 2, id=10 * k + 3),
        ]
    return trace(rows, steps(*[(k * 28 * MS, (k + 1) * 28 * MS) for k in range(n_steps)]))


def clean_run(n_steps: int = 1) -> Trace:
    """Per 16 ms step: a pinned non_blocking copy on the transfer stream hidden under a 16 ms kernel."""
    rows: list[Interval] = []
    for k in range(n_steps):
        t = k * 16 * MS
        rows += [
            iv(CPU, "cpu_op", t, t + 5 * US, "aten::to", non_blocking=True, id=10 * k),
            iv(
                TRANSFER,
                "memcpy_h2d",
                t + 10 * US,
                t + 1260 * US,
                "Memcpy HtoD (Pinned -> Device)",
                bytes=64 << 20,
                memory_kind="pinned",
                non_blocking=True,
                launch_id=10 * k,
                id=10 * k + 1,
            ),
            iv(CPU, "launch", t, t + 5 * US, "cudaLaunchKernel", id=10 * k + 2),
            iv(COMPUTE, "kernel", t, t + 16 * MS, "gemm", launch_id=10 * k + 2, id=10 * k + 3),
        ]
    return trace(rows, steps(*[(k * 16 * MS, (k + 1) * 16 * MS) for k in range(n_steps)]))


SAMPLES = 3
"""The lane of the sampled Python stacks in :func:`loader_bound`."""
LOOP = "main (train.py:40);train_epoch (train.py:30)"
LOADING = f"{LOOP};__next__ (torch/utils/data/dataloader.py:701);_next_data (torch/utils/data/dataloader.py:757)"
FORWARD = f"{LOOP};forward (model.py:12)"


def loader_bound(n: int = 6, loading: str = LOADING, rank: int = 0, extra: Sequence[Interval] = ()) -> Trace:
    """Per 8 ms step: 6 ms in ``loading`` (the DataLoader's __next__) and 2 ms in forward (sampled), then a
    launch of a 1 ms kernel; on ``rank``; and the ``extra`` rows."""
    rows = list(extra)
    for k in range(n):
        t = k * 8 * MS
        rows += [
            iv(SAMPLES, "sample", t, t + 6 * MS, loading, step=k),
            iv(SAMPLES, "sample", t + 6 * MS, t + 8 * MS, FORWARD, step=k),
            iv(CPU, "launch", t + 8 * MS - 10 * US, t + 8 * MS - 5 * US, id=1000 + 2 * k, step=k),
            iv(COMPUTE, "kernel", t + 8 * MS, t + 9 * MS, "gemm", launch_id=1000 + 2 * k, id=1001 + 2 * k, step=k),
        ]
    all_lanes = [*lanes(), Lane(0, LaneKind.CPU_THREAD, -100, "main thread: Python stack (sampled)")]
    return Trace.build(
        RunMeta(source="test", bandwidth_probe=dict(PROBE)),
        [dataclasses.replace(ln, rank=rank) for ln in all_lanes],
        rows,
        steps(*[(k * 8 * MS, (k + 1) * 8 * MS) for k in range(n)], rank=rank),
    )
