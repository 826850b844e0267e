"""The Kineto importer on a trace made here by torch.profiler on the CPU (no GPU events in it)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from collector.importers.kineto import trace_from_kineto
from collector.model import INTERVAL_COLUMNS, LaneKind, Trace
from collector.traceformat.events import EventTable, read_events


def _workload(x: object) -> object:
    import torch

    assert isinstance(x, torch.Tensor)
    y = x @ x
    if (y.sum() > 0).item():
        y = y + 1
    return y.nonzero()


def _profile(out: Path, with_stack: bool) -> int:
    """Profile steps 2 and 3 of a 5-step loop; return the profiled thread's OS id."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(out)),
        with_stack=with_stack,
    ) as prof:
        for _ in range(5):
            with record_function("my_block"):
                _workload(torch.randn(16, 16))
            prof.step()
    return threading.get_native_id()


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "with_stack"])
def profiled(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    plain_reader: Callable[[Path], EventTable],
) -> tuple[Trace, int]:
    out = tmp_path_factory.mktemp("kineto") / "cpu.pt.trace.json"
    tid = _profile(out, with_stack=request.param)
    table: EventTable = read_events(out)
    assert len(table.events) == len(plain_reader(out).events)  # top-level calls have a null "Python parent id"
    return trace_from_kineto(table, source_name=str(out)), tid


def test_cpu_ops_on_one_cpu_lane(profiled: tuple[Trace, int]) -> None:
    trace, tid = profiled
    assert list(trace.intervals.columns) == list(INTERVAL_COLUMNS)
    cpu = [ln for ln in trace.lanes if ln.kind is LaneKind.CPU_THREAD]
    stacks = any(ln.ident < 0 for ln in cpu)
    assert len(trace.lanes) == len(cpu) and cpu[0].ident == tid
    # with_stack=True adds each thread's Python stacks on a lane of their own (other threads of this process
    # that ran Python while it profiled get theirs too)
    assert all(ln.ident < 0 for ln in cpu[1:]) and ((-tid in [ln.ident for ln in cpu]) == stacks)
    ops = trace.intervals[trace.intervals["kind"] == "cpu_op"]
    assert set(ops["lane"]) == {0}
    names = set(trace.intervals["name"].astype(str))
    assert {"aten::mm", "aten::item", "aten::nonzero", "aten::randn"} <= names
    assert not any(n.startswith("ProfilerStep#") for n in names)
    kinds = set(trace.intervals["kind"].astype(str))
    assert kinds == ({"cpu_op", "annotation", "sample"} if stacks else {"cpu_op", "annotation"})


def test_python_calls_become_host_time_by_frame(profiled: tuple[Trace, int]) -> None:
    """With with_stack=True, the host-time table names the profiled function, from every call, not samples."""
    from webapp.analysis import analyze

    trace, _ = profiled
    result = analyze(trace)
    frames = result.host_frames["frame"].tolist()
    workload = [f for f in frames if f.startswith("_workload (") and "test_kineto_cpu_profile.py:" in f]
    if not any(ln.ident < 0 for ln in trace.lanes):
        assert result.host_frames_basis == "cpu_ops" and not workload and "aten::mm" in frames
        return
    assert result.host_frames_basis == "traced" and len(workload) == 1
    samples = trace.intervals[trace.intervals["kind"] == "sample"]
    assert (samples["dur_ns"] > 0).all() and samples["name"].astype(str).str.contains("_workload (", regex=False).any()
    for _, lane in samples.groupby("lane"):  # stretches of one thread never overlap
        start, end = lane["start_ns"].to_numpy(), lane["end_ns"].to_numpy()
        assert (start[1:] >= end[:-1]).all()


def test_profiler_steps_become_markers_and_step_column(profiled: tuple[Trace, int]) -> None:
    trace, _ = profiled
    steps = trace.steps()
    assert steps["step"].tolist() == [2, 3]
    assert (steps["end_ns"] > steps["start_ns"]).all()
    assert steps["start_ns"].iloc[1] >= steps["end_ns"].iloc[0]
    iv = trace.intervals
    blocks = iv[iv["name"] == "my_block"]
    assert blocks["kind"].astype(str).tolist() == ["annotation", "annotation"]
    assert blocks["step"].tolist() == [2, 3]
    mm = iv[iv["name"] == "aten::mm"]
    assert mm["step"].tolist() == [2, 3]
    inside = iv["step"] >= 0
    bounds = steps.set_index("step")
    assert (iv.loc[inside, "start_ns"].to_numpy() >= bounds.loc[iv.loc[inside, "step"], "start_ns"].to_numpy()).all()


def test_meta_and_times(profiled: tuple[Trace, int]) -> None:
    trace, _ = profiled
    assert trace.meta.source == "torch.profiler"
    assert trace.meta.world_size == 1 and trace.meta.notes["rank"] == 0
    assert trace.meta.workload == "cpu.pt.trace.json"
    iv = trace.intervals
    assert (iv["dur_ns"] >= 0).all() and (iv["dur_ns"] > 0).any()
    assert set(iv["cause"].astype(str)) == {""}  # no CUDA: nothing waits on a GPU
