"""CPU tests of the collector's logic: source lines, sync rules, op classes, clock map, trace building."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from collector import syncrules
from collector.model import IntervalKind, LaneKind, RunMeta
from collector.recording import hostwaits, sourceline
from collector.recording.build import build_trace, stream_role
from collector.recording.clock import ClockMap, take_anchor
from collector.recording.ops import OpClass, classify_op
from collector.recording.patches import Patches


def test_user_source_is_the_callers_line() -> None:
    line = sys._getframe().f_lineno + 1
    src = sourceline.user_source()
    assert src.endswith(f"test_collector_logic.py:{line}")


def test_user_source_skips_library_frames(tmp_path: object) -> None:
    lib = os.path.join(str(tmp_path), "fakelib")
    os.makedirs(lib)
    path = os.path.join(lib, "helper.py")
    with open(path, "w") as fh:
        fh.write("from collector.recording.sourceline import user_source\ndef helper():\n    return user_source()\n")
    sys.path.insert(0, lib)
    try:
        import helper

        sourceline.add_skipped_dir(lib)
        line = sys._getframe().f_lineno + 1
        src = helper.helper()
    finally:
        sys.path.remove(lib)
        sys.modules.pop("helper", None)
    assert src.endswith(f"test_collector_logic.py:{line}")


def test_format_source_relative_below_cwd() -> None:
    assert sourceline.format_source("/a/b/c.py", 3, cwd="/a") == "b/c.py:3"
    assert sourceline.format_source("/x/c.py", 3, cwd="/a") == "/x/c.py:3"
    assert sourceline.format_source("<stdin>", 1, cwd="/a") == "<stdin>:1"


def test_demo_file_counts_as_user_code() -> None:
    import collector.demos.loops

    demos = collector.demos.loops.__file__
    recorder = os.path.join(os.path.dirname(sourceline.__file__), "events_recorder.py")
    assert not sourceline._is_library(demos)
    assert sourceline._is_library(recorder)


@pytest.mark.parametrize(
    ("src", "dst", "kind"),
    [
        (False, True, IntervalKind.MEMCPY_H2D),
        (True, False, IntervalKind.MEMCPY_D2H),
        (True, True, IntervalKind.MEMCPY_D2D),
    ],
)
def test_copy_kind(src: bool, dst: bool, kind: IntervalKind) -> None:
    assert syncrules.copy_kind(src, dst) is kind


def test_copy_blocks_unless_pinned_and_non_blocking() -> None:
    h2d, d2h, d2d = IntervalKind.MEMCPY_H2D, IntervalKind.MEMCPY_D2H, IntervalKind.MEMCPY_D2D
    assert syncrules.copy_blocks(h2d, host_pinned=False, non_blocking=True)
    assert syncrules.copy_blocks(h2d, host_pinned=True, non_blocking=False)
    assert not syncrules.copy_blocks(h2d, host_pinned=True, non_blocking=True)
    assert syncrules.copy_blocks(d2h, host_pinned=False, non_blocking=True)
    assert not syncrules.copy_blocks(d2h, host_pinned=True, non_blocking=True)
    assert not syncrules.copy_blocks(d2d, host_pinned=False, non_blocking=False)


def test_implicit_sync_causes() -> None:
    assert syncrules.implicit_sync_cause("aten::_local_scalar_dense") == "item"
    assert syncrules.implicit_sync_cause("aten::nonzero") == "nonzero"
    assert syncrules.implicit_sync_cause("aten::masked_select") == "masked_index"
    assert syncrules.implicit_sync_cause("aten::index", has_bool_index=True) == "masked_index"
    assert syncrules.implicit_sync_cause("aten::index", has_bool_index=False) == ""
    assert syncrules.implicit_sync_cause("aten::mm") == ""


def test_cause_context_outermost_wins() -> None:
    assert hostwaits.current_cause() == ""
    with hostwaits.cause_context("print"):
        with hostwaits.cause_context("item"):
            assert hostwaits.current_cause() == "print"
        assert hostwaits.current_cause() == "print"
    assert hostwaits.current_cause() == ""


def test_cause_wrapper_only_for_cuda_tensors() -> None:
    seen: list[str] = []

    class T:
        is_cuda = True

        def item(self) -> str:
            seen.append(hostwaits.current_cause())
            return "v"

    wrapped = hostwaits._cause_wrapper(T.item, "item")
    assert wrapped(T()) == "v"
    T.is_cuda = False
    wrapped(T())
    assert seen == ["item", ""]


def test_wait_wrapper_measures_and_reports() -> None:
    calls: list[tuple[str, str, int, int]] = []
    wrapped = hostwaits._wait_wrapper(
        lambda x: x * 2, "cudaDeviceSynchronize", "synchronize", lambda *a: calls.append(a)
    )
    assert wrapped(21) == 42
    ((name, cause, t0, t1),) = calls
    assert (name, cause) == ("cudaDeviceSynchronize", "synchronize") and t1 >= t0


def test_patches_undo_restores_inherited_and_own_attributes() -> None:
    class Base:
        def f(self) -> int:
            return 1

    class Child(Base):
        def g(self) -> int:
            return 2

    p = Patches()
    p.set(Child, "f", lambda self: 10)
    p.set(Child, "g", lambda self: 20)
    assert (Child().f(), Child().g()) == (10, 20)
    p.undo()
    assert (Child().f(), Child().g()) == (1, 2)
    assert "f" not in Child.__dict__


@pytest.mark.parametrize(
    ("name", "is_view", "cls"),
    [
        ("aten::view", True, OpClass.SKIP),
        ("aten::empty_strided", False, OpClass.SKIP),
        ("aten::mm", False, OpClass.KERNEL),
        ("aten::copy_", False, OpClass.COPY),
        ("aten::_to_copy", False, OpClass.COPY),
        ("aten::zero_", False, OpClass.MEMSET),
        ("aten::nonzero", False, OpClass.SYNC),
        ("aten::index", False, OpClass.MASKABLE),
        ("profiler::_record_function_enter_new", False, OpClass.SKIP),
    ],
)
def test_classify_op(name: str, is_view: bool, cls: OpClass) -> None:
    assert classify_op(name, is_view) is cls


def test_clock_map_offset_and_rate() -> None:
    plain = ClockMap.from_anchors(1_000)
    assert plain.to_host_ns(np.array([0.0, 1.5])).tolist() == [1_000, 1_501_000]
    drift = ClockMap.from_anchors(0, 1_000_100_000, 1000.0)  # host ran 100 us longer over 1 s
    assert drift.to_host_ns(np.array([500.0])).tolist() == [500_050_000]
    assert ClockMap.from_anchors(0, 5_000_000, 5.0).ns_per_ms == 1e6  # too close: ignored
    assert ClockMap.from_anchors(0, 2_000_000_000, 1000.0).ns_per_ms == 1e6  # absurd rate: ignored


def test_take_anchor_keeps_the_shortest_wait() -> None:
    ticks = iter([0, 50, 100, 110, 200, 260])

    class Ev:
        def __init__(self, enable_timing: bool) -> None:
            pass

        def record(self, stream: object) -> None:
            pass

        def synchronize(self) -> None:
            pass

    ev, host = take_anchor(Ev, None, lambda: next(ticks), tries=3)
    assert host == 110


def test_build_trace_lanes_roles_and_links() -> None:
    host = [
        (11, IntervalKind.CPU_OP, "aten::mm", 100, 200, 0, "", False, 0, "", "", 0),
        (11, IntervalKind.SYNC_WAIT, "aten::_to_copy", 300, 900, 64, "pageable", False, 0, "t.py:3", "cpu", 2),
    ]
    gpu = [
        ((0, 3), IntervalKind.KERNEL, "aten::mm", 0.0005, 0.0006, 0, "", False, 0, 0, 1),
        ((0, 35), IntervalKind.MEMCPY_D2H, "aten::_to_copy", 0.0007, 0.0008, 64, "pageable", False, 0, 2, 3),
    ]
    trace = build_trace(
        RunMeta.new(),
        0,
        host,
        gpu,
        [("step", "step 0", 50, 1000, 0)],
        {11: "main thread"},
        {(0, 35): "results"},
        ClockMap(0),
    )
    kinds = [lane.kind for lane in trace.lanes]
    assert kinds == [LaneKind.CPU_THREAD, LaneKind.COMPUTE_STREAM, LaneKind.TRANSFER_STREAM]
    assert "results" in trace.lanes[2].label
    iv = trace.intervals.set_index("id")
    assert iv.loc[1, "start_ns"] == 500 and iv.loc[1, "launch_id"] == 0
    assert iv.loc[2, "cause"] == "cpu"
    assert iv.loc[2, "source"] == "t.py:3"
    assert list(trace.steps()["step"]) == [0]


def test_stream_role() -> None:
    assert stream_role({"memcpy_h2d"}) is LaneKind.TRANSFER_STREAM
    assert stream_role({"memcpy_h2d", "kernel"}) is LaneKind.COMPUTE_STREAM


def test_build_trace_subtracts_event_overhead_at_most_half() -> None:
    gpu = [
        ((0, 3), IntervalKind.KERNEL, "long", 1.0, 1.1, 0, "", False, 0, -1, 0),  # 100 us
        ((0, 3), IntervalKind.KERNEL, "tiny", 2.0, 2.002, 0, "", False, 0, -1, 1),  # 2 us
    ]
    trace = build_trace(RunMeta.new(), 0, [], gpu, [], {}, {}, ClockMap(0), event_overhead_ms=0.003)
    iv = trace.intervals.set_index("id")
    assert iv.loc[0, "dur_ns"] == 97_000 and iv.loc[0, "end_ns"] == 1_100_000
    assert iv.loc[1, "dur_ns"] == 1_000 and iv.loc[1, "end_ns"] == 2_002_000
