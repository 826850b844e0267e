"""The Kineto importer on a hand-written GPU trace whose right answers are known exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from collector.importers.kineto import trace_from_kineto
from collector.model import INTERVAL_COLUMNS, MARKER_COLUMNS, Lane, LaneKind, Trace
from collector.traceformat.events import EVENT_COLUMNS, EventTable, read_events
from collector.traceformat.spec import TraceFileError


@pytest.fixture
def trace(gpu_fixture: EventTable) -> Trace:
    return trace_from_kineto(gpu_fixture, source_name="/runs/job7/rank1.pt.trace.json")


def by_name(trace: Trace, name: str) -> pd.DataFrame:
    iv = trace.intervals
    return iv[iv["name"].astype(str) == name]


def one(trace: Trace, name: str, **match: object) -> pd.Series:
    rows = by_name(trace, name)
    for col, value in match.items():
        rows = rows[rows[col] == value]
    assert len(rows) == 1, f"{name} {match}: {len(rows)} rows"
    return rows.iloc[0]


def test_columns_and_dtypes_follow_the_model(trace: Trace) -> None:
    assert list(trace.intervals.columns) == list(INTERVAL_COLUMNS)
    assert [str(t) for t in trace.intervals.dtypes] == [str(d) for d, _ in INTERVAL_COLUMNS.values()]
    assert list(trace.markers.columns) == list(MARKER_COLUMNS)
    assert trace.intervals["id"].tolist() == list(range(len(trace.intervals)))


def test_lanes_one_per_stream_with_roles_and_rank(trace: Trace) -> None:
    assert trace.lanes == (
        Lane(1, LaneKind.CPU_THREAD, 4242, "main thread"),  # its id is the process id
        Lane(1, LaneKind.COMPUTE_STREAM, 7, "stream 7 (compute)"),
        Lane(1, LaneKind.TRANSFER_STREAM, 20, "stream 20 (transfer)"),
        Lane(1, LaneKind.COMM_STREAM, 30, "stream 30 (comm)"),
        Lane(1, LaneKind.CPU_THREAD, -4242, "main thread: Python stack (torch.profiler)"),  # its Python calls
    )
    assert set(trace.intervals["rank"]) == {1}
    stream_of = trace.intervals.groupby("lane")["stream"].first().to_dict()
    assert stream_of == {0: 4242, 1: 7, 2: 20, 3: 30, 4: -4242}


def test_kinds_counts(trace: Trace) -> None:
    counts = trace.intervals["kind"].astype(str).value_counts().to_dict()
    assert counts == {
        "cpu_op": 10,
        "launch": 7,
        "sync_wait": 4,
        "annotation": 3,
        "kernel": 2,
        "memcpy_h2d": 2,
        "memcpy_d2h": 1,
        "memcpy_d2d": 1,
        "memset": 1,
        "collective": 1,
        "sample": 11,  # stretches of one Python stack (test_python_calls_are_cut_into_stretches_of_one_stack)
    }
    names = set(trace.intervals["name"].astype(str))
    assert not names & {
        "ProfilerStep#0",
        "ProfilerStep#1",
        "PyTorch Profiler (0)",
        "Stream Sync",
        "Context Sync",
    }
    assert not any(n.startswith(("train.py", "<built-in", "torch/")) for n in names)  # no frame is its own row


def test_copies_bytes_memory_kinds_and_non_blocking(trace: Trace) -> None:
    cols = ["kind", "lane", "bytes", "memory_kind", "non_blocking", "start_ns", "end_ns"]
    copies = trace.intervals[trace.intervals["kind"].astype(str).str.startswith("mem")][cols]
    got = {tuple(str(v) if i in (0, 3) else v for i, v in enumerate(r)) for r in copies.itertuples(index=False)}
    assert got == {
        ("memcpy_h2d", 1, 4194304, "pageable", False, 1_020_000, 1_060_000),
        ("memcpy_h2d", 2, 8388608, "pinned", True, 1_090_000, 1_120_000),
        ("memcpy_d2h", 1, 4, "pinned", False, 1_326_000, 1_328_000),
        ("memcpy_d2d", 1, 1024, "device", True, 1_620_000, 1_630_000),
        ("memset", 2, 512, "device", False, 1_650_000, 1_651_000),
    }
    assert (trace.intervals.loc[trace.intervals["kind"] == "kernel", "bytes"] == 0).all()


def test_launch_links_by_correlation_and_by_flow(trace: Trace) -> None:
    iv = trace.intervals.set_index("id")
    gemm = one(trace, "ampere_sgemm_128x64_tn")
    assert iv.loc[gemm["launch_id"], "name"] == "cudaLaunchKernel"
    assert iv.loc[gemm["launch_id"], "start_ns"] == 1_112_000
    nccl = by_name(trace, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)")
    assert nccl["kind"].astype(str).tolist() == ["collective"]
    assert nccl["bytes"].tolist() == [4096]  # 1024 Float elements (torch.profiler's collective metadata)
    assert nccl["group"].astype(str).tolist() == ["default_pg (pg 0)"]
    assert set(iv.loc[iv["kind"] != "collective", "group"].astype(str)) == {""}
    assert iv.loc[nccl["launch_id"].iloc[0], "start_ns"] == 1_136_000  # only the ac2g flow links this one
    pageable = one(trace, "Memcpy HtoD (Pageable -> Device)")
    assert iv.loc[pageable["launch_id"], "kind"] == "sync_wait"
    assert iv.loc[pageable["launch_id"], "start_ns"] == 1_015_000
    gpu = trace.intervals[trace.intervals["lane_kind"] != "cpu_thread"]
    assert (gpu[gpu["kind"] != "annotation"]["launch_id"] >= 0).all()
    assert (gpu[gpu["kind"] == "annotation"]["launch_id"] == -1).all()
    assert (trace.intervals[trace.intervals["lane"] == 0]["launch_id"] == -1).all()


def test_sync_waits_causes_and_sources(trace: Trace) -> None:
    syncs = trace.intervals[trace.intervals["kind"] == "sync_wait"]
    got = [(str(r.name), r.start_ns, r.end_ns, str(r.cause), str(r.source), r.step) for r in syncs.itertuples()]
    assert got == [
        ("cudaMemcpyAsync", 1_015_000, 1_065_000, "blocking_copy", "train.py:20 (train_step)", 0),
        ("cudaStreamSynchronize", 1_066_000, 1_068_000, "blocking_copy", "train.py:20 (train_step)", 0),
        ("cudaStreamSynchronize", 1_162_000, 1_332_000, "item", "train.py:20 (train_step)", 0),
        ("cudaDeviceSynchronize", 1_705_000, 1_755_000, "synchronize", "train.py:20 (train_step)", 1),
    ]
    others = trace.intervals[trace.intervals["kind"] != "sync_wait"]
    assert set(others["cause"].astype(str)) == {""} and set(others["source"].astype(str)) == {""}
    pinned_launch = one(trace, "cudaMemcpyAsync", start_ns=1_085_000)
    assert pinned_launch["kind"] == "launch"


def test_steps_markers_and_step_column(trace: Trace) -> None:
    steps = trace.steps()
    assert steps.to_dict("records") == [
        {"rank": 1, "step": 0, "start_ns": 1_000_000, "end_ns": 1_500_000},
        {"rank": 1, "step": 1, "start_ns": 1_600_000, "end_ns": 1_900_000},
    ]
    late = by_name(trace, trace.intervals["name"].astype(str)[trace.intervals["start_ns"] == 1_950_000].iloc[0])
    assert late["step"].tolist() == [1]  # runs after step 1 ends, but step 1 launched it
    assert one(trace, "custom thing")["step"] == 0
    assert one(trace, "cudaLaunchKernel", start_ns=1_800_000)["step"] == 1
    timed = trace.intervals[trace.intervals["kind"] != "sample"]
    assert (timed["step"] >= 0).all()  # the Python stacks before the first step are in none


def test_python_calls_are_cut_into_stretches_of_one_stack(trace: Trace) -> None:
    iv = trace.intervals
    s = iv[iv["kind"] == "sample"]
    m, t = "<module> (train.py:10)", "train_step (train.py:20)"
    assert list(zip(s["start_ns"] // 1000, s["end_ns"] // 1000, s["step"], s["name"].astype(str), strict=True)) == [
        (900, 1001, -1, m),
        (1001, 1002, 0, f"{m};{t}"),
        (1002, 1007, 0, f"{m};{t};load_batch (train.py:40)"),
        (1007, 1150, 0, f"{m};{t}"),
        (1150, 1340, 0, f"{m};{t};<built-in method item of Tensor object>"),
        (1340, 1401, 0, f"{m};{t}"),
        (1401, 1601, 0, m),
        (1601, 1700, 1, f"{m};{t}"),
        (1700, 1760, 1, f"{m};{t};synchronize (torch/cuda/__init__.py:1040)"),
        (1760, 1851, 1, f"{m};{t}"),
        (1851, 2000, 1, m),
    ]


def test_annotations_and_unknown_categories(trace: Trace) -> None:
    ann = trace.intervals[trace.intervals["kind"] == "annotation"]
    assert sorted(zip(ann["name"].astype(str), ann["lane"], strict=True)) == [
        ("custom thing", 0),
        ("forward", 0),
        ("train_step", 1),
    ]
    assert trace.meta.notes["unknown_categories_as_annotations"] == {"my_custom_category": 1}


def test_run_meta(trace: Trace) -> None:
    meta = trace.meta
    assert meta.source == "torch.profiler"
    assert meta.world_size == 2 and meta.notes["rank"] == 1
    assert meta.device_name == "NVIDIA H200" and meta.device_properties["numSms"] == 132
    assert meta.cuda_version == "12080"
    assert meta.workload == "rank1.pt.trace.json"
    assert meta.notes["kineto"]["distributedInfo"]["backend"] == "nccl"


def test_table_without_event_columns_is_a_one_line_error() -> None:
    with pytest.raises(TraceFileError, match=r"x\.json: event table lacks columns .*arg_correlation"):
        trace_from_kineto(EventTable({}, pd.DataFrame({"ph": ["X"]})), source_name="x.json")


def test_empty_table_gives_an_empty_trace() -> None:
    empty = pd.DataFrame({c: pd.Series([], dtype=d) for c, d in EVENT_COLUMNS.items()})
    trace = trace_from_kineto(EventTable({"traceEvents": []}, empty))
    assert trace.lanes == () and trace.intervals.empty and trace.markers.empty
    assert list(trace.intervals.columns) == list(INTERVAL_COLUMNS)


@pytest.mark.parametrize("batch", [25_000, 1])
@pytest.mark.parametrize("fast", [True, False])
def test_the_reader_folds_collective_metadata_into_bytes_and_group(
    tmp_path: Path, fast: bool, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both reader paths: bytes from the larger message, the group from its name and description (a number
    as name reads as its text); a trace without the metadata keeps the defaults. With one event per batch
    the metadata columns are allocated only when the first event that has them arrives."""
    from collector.traceformat import parse_json

    monkeypatch.setattr(parse_json, "BATCH", batch)
    events = [
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
         "args": {"In msg nelems": 10, "Out msg nelems": 40, "dtype": "BFloat16", "Process Group Name": 3}},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 7, "ts": 4, "dur": 2,
         "args": {"In msg nelems": 8, "Out msg nelems": 8, "dtype": "Float", "Process Group Name": "0",
                  "Process Group Description": "default_pg"}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 8, "dur": 2, "args": {}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    events.insert(0, events.pop())  # the first event has no metadata
    path.write_text(json.dumps({"traceEvents": events}))
    ev = read_events(path, fast=fast).events
    assert ev["arg_bytes"].tolist() == [-1, 80, 32]
    assert ev["arg_group"].astype(str).tolist() == ["", "pg 3", "default_pg (pg 0)"]
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"traceEvents": events[:1]}))
    assert read_events(plain, fast=fast).events["arg_group"].astype(str).tolist() == [""]


def test_by_start_orders_rows_by_start_then_lane_and_keeps_every_link(gpu_fixture: EventTable, trace: Trace) -> None:
    """The recorder imports by start: the same rows, ids in (start, lane) order, each launch link pointing
    at the same launch as in the lane-ordered import."""
    timed = trace_from_kineto(gpu_fixture, source_name="/runs/job7/rank1.pt.trace.json", by_start=True)
    a, b = trace.intervals, timed.intervals
    assert b["id"].tolist() == list(range(len(b)))
    assert list(zip(b["start_ns"], b["lane"], strict=True)) == sorted(zip(b["start_ns"], b["lane"], strict=True))
    assert list(zip(a["start_ns"], a["lane"], strict=True)) != list(zip(b["start_ns"], b["lane"], strict=True))

    def links(iv: pd.DataFrame) -> set[tuple[str, int, str, int]]:
        at = iv.set_index("id")
        linked = iv[iv["launch_id"] >= 0]
        return {
            (str(r.name), int(r.start_ns), str(at.loc[r.launch_id, "name"]), int(at.loc[r.launch_id, "start_ns"]))
            for r in linked.itertuples()
        }

    assert len(a) == len(b) and links(a) == links(b) and len(links(b)) > 0
    assert timed.lanes == trace.lanes
