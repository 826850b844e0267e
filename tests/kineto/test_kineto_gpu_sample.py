"""The Kineto importer on small traces recorded by torch.profiler on an H200 (see make_gpu_trace.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from collector.importers.kineto import trace_from_kineto
from collector.load import load_trace
from collector.model import LaneKind, Trace
from collector.traceformat.events import EventTable, read_events

SAMPLE = Path(__file__).parent / "data" / "gpu_step.pt.trace.json.gz"


@pytest.fixture(scope="module")
def trace(plain_reader: Callable[[Path], EventTable]) -> Trace:
    return trace_from_kineto(plain_reader(SAMPLE), source_name=str(SAMPLE))


def test_lanes_and_roles(trace: Trace) -> None:
    kinds = [(ln.kind, ln.ident, ln.label) for ln in trace.lanes]
    assert kinds[1:] == [
        (LaneKind.COMPUTE_STREAM, 7, "stream 7 (compute)"),
        (LaneKind.TRANSFER_STREAM, 13, "stream 13 (transfer)"),
        (LaneKind.CPU_THREAD, -kinds[0][1], "main thread: Python stack (torch.profiler)"),  # with_stack=True
    ]
    assert kinds[0][0] is LaneKind.CPU_THREAD
    assert trace.meta.device_name == "NVIDIA H200" and trace.meta.world_size == 1


def test_every_gpu_op_is_linked_to_its_launch(trace: Trace) -> None:
    iv = trace.intervals
    gpu = iv[(iv["lane_kind"] != "cpu_thread") & (iv["kind"] != "annotation")]
    assert len(gpu) == 48 + 14 + 4  # kernels, memcpys, memsets in the file
    launches = iv.set_index("id").loc[gpu["launch_id"]]
    assert set(launches["kind"].astype(str)) <= {"launch", "sync_wait"}
    assert (launches["lane"] == 0).all()
    assert (launches["start_ns"].to_numpy() <= gpu["start_ns"].to_numpy()).all()


def test_copies_per_step(trace: Trace) -> None:
    iv = trace.intervals
    big = iv[iv["kind"].astype(str).str.startswith("memcpy") & (iv["bytes"] == 1 << 20)]
    got = sorted(
        (r.step, str(r.kind), str(r.memory_kind), r.non_blocking, trace.lanes[r.lane].ident) for r in big.itertuples()
    )
    per_step = [
        ("memcpy_d2h", "pageable", False, 7),
        ("memcpy_h2d", "pageable", False, 7),
        ("memcpy_h2d", "pinned", True, 7),
        ("memcpy_h2d", "pinned", True, 13),
    ]
    assert got == [(s, *row) for s in (2, 3) for row in per_step]


def test_sync_waits_with_causes_and_source(trace: Trace) -> None:
    iv = trace.intervals
    syncs = iv[(iv["kind"] == "sync_wait") & (iv["step"] == 2)]
    assert syncs["cause"].astype(str).tolist() == [
        "blocking_copy",
        "blocking_copy",
        "item",
        "nonzero",
        "masked_index",
        "synchronize",
        "cpu",
        "cpu",
    ]
    assert set(syncs["source"].astype(str)) == {"make_gpu_trace.py:25 (train_step)"}
    assert (iv[iv["kind"] == "sync_wait"]["step"].value_counts().loc[[2, 3]] == 8).all()


def test_steps(trace: Trace) -> None:
    assert trace.steps()["step"].tolist() == [2, 3]


TRAIN = Path(__file__).parent / "data" / "gpu_train.pt.trace.json.gz"


@pytest.fixture(scope="module")
def train() -> Trace:
    return trace_from_kineto(read_events(TRAIN), source_name=str(TRAIN))  # the real reader: no stacks here


def test_training_step_backward_thread_gets_its_own_lane(train: Trace) -> None:
    cpu = [ln for ln in train.lanes if ln.kind is LaneKind.CPU_THREAD]
    assert [ln.label for ln in cpu] == ["main thread", f"autograd thread {cpu[1].ident}"]  # pt_autograd_0
    iv = train.intervals
    backward = iv[iv["lane"] == 1]
    assert backward["name"].astype(str).str.startswith("autograd::engine::evaluate_function").any()
    assert (backward["step"].isin([2, 3])).all()


def test_training_step_kernels_all_linked_and_stepped(train: Trace) -> None:
    iv = train.intervals
    gpu = iv[(iv["lane_kind"] != "cpu_thread") & (iv["kind"] != "annotation")]
    assert len(gpu) == 60 and (gpu["launch_id"] >= 0).all()
    assert gpu["step"].value_counts().to_dict() == {2: 30, 3: 30}
    copies = gpu[gpu["kind"] == "memcpy_h2d"]
    assert copies[["bytes", "memory_kind", "non_blocking", "step"]].astype(str).values.tolist() == [
        ["131072", "pinned", "True", "2"],
        ["512", "pinned", "True", "2"],
        ["131072", "pinned", "True", "3"],
        ["512", "pinned", "True", "3"],
    ]
    syncs = iv[iv["kind"] == "sync_wait"]
    assert syncs["cause"].astype(str).tolist() == ["synchronize"]  # the profiler's own, after the steps
    assert syncs["step"].tolist() == [-1]


def test_load_trace_imports_torch_profiler_files(train: Trace) -> None:
    loaded = load_trace(TRAIN)
    assert loaded.meta.source == "torch.profiler"
    assert loaded.intervals.drop(columns="id").equals(train.intervals.drop(columns="id"))


def test_load_trace_reads_with_stack_traces(trace: Trace) -> None:
    assert len(load_trace(SAMPLE).intervals) == len(trace.intervals)


def test_the_backward_thread_is_named_by_what_it_runs_where_the_trace_names_it_only_python(tmp_path: Path) -> None:
    """Older torch.profiler traces name every thread after the process ("python3.8"): the thread running
    autograd's evaluate_function is still the autograd thread."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(TRAIN.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            e["args"]["name"] = "python3.8"
    path = tmp_path / "renamed.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    cpu = [ln for ln in load_trace(str(path)).lanes if ln.kind is LaneKind.CPU_THREAD]
    assert [ln.label for ln in cpu] == ["main thread", f"autograd thread {cpu[1].ident}"]
