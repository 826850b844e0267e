"""Edge cases of the Kineto importer: several devices, named streams, driver launches, odd events."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from collector.importers.kineto import trace_from_kineto
from collector.model import INTERVAL_COLUMNS, LaneKind, Trace
from collector.traceformat.events import EventTable


def _x(cat: str, name: str, pid: Any, tid: Any, ts: float, dur: float | None, **args: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "args": args,
    }
    if dur is not None:
        event["dur"] = dur
    return event


def _import(tmp_path: Path, reader: Callable[[Path], EventTable], events: list[dict[str, Any]]) -> Trace:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return trace_from_kineto(reader(path))


def test_two_devices_named_streams_and_driver_launches(
    tmp_path: Path, plain_reader: Callable[[Path], EventTable]
) -> None:
    trace = _import(
        tmp_path,
        plain_reader,
        [
            _x("cuda_driver", "cuLaunchKernel", 10, 11, 1.0, 2.0, correlation=1),
            _x("kernel", "triton_poi_fused_add_0", 0, 7, 5.0, 3.0, device=0, stream=7, correlation=1),
            _x("cuda_runtime", "cudaLaunchKernel", 10, 11, 4.0, 2.0, correlation=2),
            _x("kernel", "k2", 1, "stream 9", 8.0, 1.0, device=1, correlation=2),
            _x("cuda_runtime", "cudaMemcpy", 10, 11, 10.0, 5.0, correlation=3),
            _x(
                "gpu_memcpy",
                "Memcpy DtoH (Device -> Pageable)",
                1,
                9,
                11.0,
                2.0,
                device=1,
                stream=9,
                correlation=3,
                bytes=64,
            ),
            _x("cpu_op", "aten::empty", 10, 11, 20.0, None),
        ],
    )
    assert [(ln.kind, ln.ident, ln.label) for ln in trace.lanes] == [
        (LaneKind.CPU_THREAD, 11, "thread 11"),
        (LaneKind.COMPUTE_STREAM, 7, "GPU 0 stream 7 (compute)"),
        (LaneKind.COMPUTE_STREAM, 9, "GPU 1 stream 9 (compute)"),
    ]
    iv = trace.intervals.set_index("id")
    kernels = iv[iv["kind"] == "kernel"]
    assert iv.loc[kernels["launch_id"], "name"].astype(str).tolist() == ["cuLaunchKernel", "cudaLaunchKernel"]
    sync = iv[iv["kind"] == "sync_wait"]
    assert sync["name"].astype(str).tolist() == ["cudaMemcpy"]
    assert sync["cause"].astype(str).tolist() == ["blocking_copy"] and sync["source"].astype(str).tolist() == [""]
    empty_op = iv[iv["name"] == "aten::empty"]
    assert empty_op["dur_ns"].tolist() == [0]  # an X event without dur is kept as an instant
    assert (iv["step"] == -1).all() and trace.markers.empty


def test_only_annotations_on_a_stream_make_it_other(tmp_path: Path, plain_reader: Callable[[Path], EventTable]) -> None:
    trace = _import(
        tmp_path,
        plain_reader,
        [
            _x("gpu_user_annotation", "region", 0, 3, 1.0, 2.0),
            _x("overhead", "Instrumentation", -1, 0, 1.0, 2.0),  # no usable thread: skipped
            {"ph": "i", "s": "t", "name": "mark", "pid": 10, "tid": 11, "ts": 1.0},
        ],
    )
    assert [(ln.kind, ln.label) for ln in trace.lanes] == [(LaneKind.OTHER_STREAM, "stream 3 (other)")]
    assert trace.intervals["kind"].astype(str).tolist() == ["annotation"]


@pytest.mark.parametrize("seed", range(8))
def test_any_subset_of_events_imports(seed: int, gpu_fixture: EventTable) -> None:
    """Traces cut short or filtered (events missing on either side of a link) never break the importer."""
    rng = np.random.default_rng(seed)
    events = gpu_fixture.events
    keep = np.sort(rng.choice(len(events), size=len(events) // 2, replace=False))
    table = EventTable(gpu_fixture.top, events.iloc[keep].reset_index(drop=True), gpu_fixture.id_names)
    trace = trace_from_kineto(table)
    iv = trace.intervals
    assert list(iv.columns) == list(INTERVAL_COLUMNS)
    assert iv["lane"].between(0, len(trace.lanes) - 1).all()
    linked = iv["launch_id"][iv["launch_id"] >= 0]
    assert linked.isin(iv["id"]).all()
    assert (iv.set_index("id").loc[linked, "lane_kind"] == "cpu_thread").all()


def test_legacy_categories_read_as_today_and_unknown_ones_are_said(
    tmp_path: Path, plain_reader: Callable[[Path], EventTable]
) -> None:
    """An older torch.profiler's "Runtime" / "Kernel" categories, and a category nobody reads."""
    from webapp.analysis import analyze

    events = [
        _x("Runtime", "cudaLaunchKernel", 1, 1, 100.0, 5.0, correlation=7),
        _x("Kernel", "gemm", 0, 7, 110.0, 50.0, correlation=7, stream=7, device=0),
        _x("Runtime", "cudaLaunchKernel", 1, 1, 200.0, 5.0, correlation=8),
        _x("Kernel", "gemm", 0, 7, 210.0, 50.0, correlation=8, stream=7, device=0),
        _x("npu_runtime", "npuLaunch", 1, 1, 300.0, 5.0),
    ]
    trace = _import(tmp_path, plain_reader, events)
    iv = trace.intervals
    assert iv.groupby("kind", observed=True).size().to_dict() == {"kernel": 2, "launch": 2, "annotation": 1}
    assert (iv.loc[iv["kind"] == "kernel", "launch_id"] >= 0).all()
    notes = analyze(trace).notes
    assert any(n.startswith("1 event of categories this version does not read (npu_runtime (1))") for n in notes)


def test_a_loaded_trace_is_named_after_its_file_and_dated_by_its_own_clock() -> None:
    from collector.load import load_trace

    path = Path(__file__).parent / "data" / "gpu_step.pt.trace.json.gz"
    meta = load_trace(path).meta
    assert meta.workload == "gpu_step.pt.trace.json.gz"  # not the name the profiler gave its export
    assert meta.created == "2026-12-02T14:40:42+00:00"  # baseTimeNanoseconds + its first event, not the import
