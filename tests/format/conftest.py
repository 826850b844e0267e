"""Fixtures for the trace-format tests: a trace holding every lane kind, interval kind and marker kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from collector.model import (
    HOST_KINDS,
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
from collector.synthetic.kineto_json import generate

BASE_NS = 1_700_000_000_123_456_789  # epoch-sized times: doubles could not hold these to the nanosecond


def full_trace() -> Trace:
    """Two ranks, every LaneKind, every IntervalKind (on CPU and GPU lanes), steps and marks."""
    lanes = [
        Lane(0, LaneKind.CPU_THREAD, 4242, "main thread"),
        Lane(0, LaneKind.COMPUTE_STREAM, 7, 'stream 7 "compute"'),
        Lane(0, LaneKind.TRANSFER_STREAM, 13, "copies"),
        Lane(1, LaneKind.CPU_THREAD, 4343, "main thread"),
        Lane(1, LaneKind.COMM_STREAM, 20, "nccl"),
        Lane(1, LaneKind.OTHER_STREAM, 21, "stream 21 ünïcode"),
    ]
    rows = []
    for i, kind in enumerate(IntervalKind):
        host = kind in HOST_KINDS or kind is IntervalKind.ANNOTATION
        lane = (0 if i % 2 else 3) if host else (1, 2, 4, 5)[i % 4]
        start = BASE_NS + i * 1_001 + (7 if i % 3 else 0)
        rows.append(
            Interval(
                lane=lane,
                kind=kind,
                name=f'{kind.value} <float, "q"> \\ ü #{i}',
                start_ns=start,
                end_ns=start + 333 + i,
                bytes=i * 4096 if kind.value.startswith("mem") else 0,
                memory_kind=MemoryKind.PAGEABLE
                if kind is IntervalKind.MEMCPY_D2H
                else (MemoryKind.PINNED if kind is IntervalKind.MEMCPY_H2D else MemoryKind.NONE),
                non_blocking=kind is IntervalKind.MEMCPY_H2D,
                step=i // 4,
                source="train.py:88" if host else "",
                cause="item" if kind is IntervalKind.SYNC_WAIT else "",
                launch_id=0 if not host else -1,
                id=100 + i,
            )
        )
    rows.append(Interval(1, IntervalKind.ANNOTATION, "gpu range", BASE_NS + 50, BASE_NS + 50))  # zero length
    rows.append(Interval(0, IntervalKind.CPU_OP, "aten::mm", BASE_NS + 99_999_999_999, BASE_NS + 100_000_000_000))
    markers = [
        Marker(0, MarkerKind.STEP, "ProfilerStep#0", BASE_NS - 5, BASE_NS + 6_000, 0),
        Marker(0, MarkerKind.STEP, "ProfilerStep#1", BASE_NS + 6_000, BASE_NS + 12_000, 1),
        Marker(1, MarkerKind.MARK, "checkpoint", BASE_NS + 77, BASE_NS + 77),
    ]
    meta = RunMeta.new(
        workload="demo:overlap",
        source="demo",
        world_size=2,
        device_name="NVIDIA H200",
        device_properties={"sm": 90, "memory_gb": 139.8},
        torch_version="2.13",
        bandwidth_probe={"h2d_pinned_gbps": 53.7},
        notes={"free": "form"},
    )
    return Trace.build(meta, lanes, rows, markers)


@pytest.fixture
def trace() -> Trace:
    return full_trace()


@pytest.fixture
def kineto_like() -> Callable[..., Path]:
    """Writes a small torch.profiler-shaped trace with the synthetic Kineto generator: f(path, size=200_000)."""

    def make(path: Path, size: int = 200_000) -> Path:
        generate(path, size)
        return path

    return make
