"""CUPTI recording's logic without a GPU: the event table from Kineto events, the join of the recorder's
host facts (causes, lines, op names, steps, annotations), the clock line, and the events-mode launch bound."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

from collector.importers.kineto import trace_from_kineto
from collector.model import RunMeta, Trace
from collector.recording import gcspans
from collector.recording.build import build_trace, launch_end_ns
from collector.recording.clock import ClockLine, ClockMap
from collector.recording.enrich import HostFacts, drop_empty_last_step, enrich
from collector.recording.kineto_capture import event_table

TID = 4242
KERNEL = "void at::native::vectorized_elementwise_kernel<4, MulFunctor<float>>"


@dataclass
class FakeEvent:
    """The ``_KinetoEvent`` methods the capture reads."""

    cat: str
    label: str
    start: int
    end: int
    corr: int = 0
    stream: int = -1
    nbytes_: int = 0
    tid: int = TID

    def activity_type(self) -> str:
        return self.cat

    def name(self) -> str:
        return self.label

    def start_ns(self) -> int:
        return self.start

    def end_ns(self) -> int:
        return self.end

    def device_type(self) -> str:
        gpu = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
        return "DeviceType.CUDA" if self.cat in gpu else "DeviceType.CPU"

    def device_index(self) -> int:
        return 0 if self.device_type().endswith("CUDA") else 1

    def device_resource_id(self) -> int:
        return self.stream if self.device_type().endswith("CUDA") else self.tid

    def correlation_id(self) -> int:
        return self.corr

    def nbytes(self) -> int:
        return self.nbytes_

    def start_thread_id(self) -> int:
        return self.tid


def _events() -> list[FakeEvent]:
    return [
        FakeEvent("cpu_op", "aten::mul_", 95, 118),  # op names were collected here (first step)
        FakeEvent("cpu_op", "aten::empty", 96, 99),  # a child that ended before the launch
        FakeEvent("cuda_runtime", "cudaLaunchKernel", 100, 110, corr=1),
        FakeEvent("kernel", KERNEL, 120, 150, corr=1, stream=7),
        FakeEvent("cuda_runtime", "cudaMemcpyAsync", 200, 400, corr=2),
        FakeEvent("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 210, 390, corr=2, stream=7, nbytes_=0),
        FakeEvent("cuda_runtime", "cudaStreamSynchronize", 400, 900, corr=3),
        FakeEvent("user_annotation", "dropped: the recorder has its own", 90, 95),
        FakeEvent("cuda_runtime", "cudaLaunchKernel", 1000, 1010, corr=4),  # a later step: no op names
        FakeEvent("kernel", KERNEL, 1020, 1030, corr=4, stream=7),
        FakeEvent("cuda_runtime", "cudaMemcpyAsync", 1500, 1505, corr=5),  # the recorder's stream tag
        FakeEvent("gpu_memcpy", "Memcpy DtoD (Device -> Device)", 1510, 1512, corr=5, stream=9, nbytes_=4),
    ]


def _recorded(facts: HostFacts) -> Trace:
    raw = trace_from_kineto(event_table(_events(), pid=1))
    return enrich(raw, facts, RunMeta.new(workload="t", clock="unix_ns", notes={"timing": "cupti"}))


FACTS = HostFacts(
    spans=[(TID, "item", 190, 950, "train.py:12", 4000)],
    annotations=[(TID, "forward", 90, 160)],
    markers=[("step", "step 0", 0, 500, 0), ("step", "step 1", 500, 2000, 1)],
    threads={TID: "main thread"},
    stream_tags=[(1499, 1506, "prefetch")],
)


def test_event_table_keeps_gpu_work_and_runtime_calls() -> None:
    table = event_table(_events(), pid=1)
    ev = table.events
    assert list(ev["cat"].astype(str)).count("user_annotation") == 0
    kernel = ev[ev["cat"] == "kernel"].iloc[0]
    assert (kernel["pid"], kernel["tid"], kernel["arg_stream"], kernel["arg_correlation"]) == (0, 7, 7, 1)
    copy = ev[ev["cat"] == "gpu_memcpy"].iloc[0]
    assert copy["arg_bytes"] == 0 and copy["dur_ns"] == 180
    runtime = ev[ev["name"] == "cudaStreamSynchronize"].iloc[0]
    assert (runtime["pid"], runtime["tid"], runtime["arg_stream"]) == (1, TID, -1)


class UntypedEvent(FakeEvent):
    """torch 2.11's events: no ``activity_type()``; the category comes from name and device."""

    def __getattribute__(self, item: str) -> Any:
        if item == "activity_type":
            raise AttributeError(item)
        return super().__getattribute__(item)

    def device_index(self) -> int:
        if self.device_type().endswith("CUDA"):
            return 0
        return -1 if self.cat in ("cuda_driver", "overhead") else 1

    def device_resource_id(self) -> int:
        return self.stream if self.device_type().endswith("CUDA") else (0 if self.device_index() < 0 else TID)


def test_untyped_events_get_their_category_from_name_and_device() -> None:
    events = [e for e in _events() if e.cat != "user_annotation"]
    extra = [
        FakeEvent("cuda_driver", "Lazy Function Loading", 101, 109, corr=1),
        FakeEvent("overhead", "Activity Buffer Request", 10, 20),
        FakeEvent("gpu_user_annotation", "Optimizer.step#SGD.step", 1000, 1040, corr=77, stream=7),
    ]
    untyped = [UntypedEvent(**vars(e)) for e in events + extra]
    for e in untyped:
        e.tid = TID
    table = event_table(untyped, pid=1).events
    typed = event_table(events, pid=1).events
    assert list(table["cat"].astype(str))[: len(typed)] == list(typed["cat"].astype(str))
    assert table[table["name"] == "Optimizer.step#SGD.step"].iloc[0]["cat"] == "gpu_user_annotation"
    lazy = table[table["name"] == "Lazy Function Loading"].iloc[0]
    assert (lazy["cat"], lazy["tid"], lazy["arg_correlation"]) == ("cuda_driver", TID, -1)
    assert "Activity Buffer Request" not in set(table["name"].astype(str))


def test_waits_get_the_cause_and_line_of_the_python_call_around_them() -> None:
    iv = _recorded(FACTS).intervals
    waits = iv[iv["kind"] == "sync_wait"]
    assert sorted(waits["name"].astype(str)) == ["cudaMemcpyAsync", "cudaStreamSynchronize"]
    assert set(waits["cause"].astype(str)) == {"item"}
    assert set(waits["source"].astype(str)) == {"train.py:12"}
    copy = iv[iv["kind"] == "memcpy_d2h"].iloc[0]
    assert copy["source"] == "train.py:12" and copy["memory_kind"] == "pageable"
    assert copy["bytes"] == 4000  # CUPTI gave none: the span's tensor size


def test_a_wait_outside_any_span_keeps_the_runtime_cause() -> None:
    iv = _recorded(HostFacts(markers=FACTS.markers)).intervals
    waits = iv[iv["kind"] == "sync_wait"].set_index("name")
    assert waits.loc["cudaStreamSynchronize", "cause"] == "stream_synchronize"
    assert waits.loc["cudaMemcpyAsync", "cause"] == "blocking_copy"
    assert set(waits["source"].astype(str)) == {""}


def test_gpu_work_is_named_by_its_op_exactly_or_by_its_kernel() -> None:
    trace = _recorded(FACTS)
    kernels = trace.intervals[trace.intervals["kind"] == "kernel"]
    assert list(kernels["name"].astype(str)) == ["aten::mul_", "aten::mul_"]
    assert "1 exact" in trace.meta.notes["op_names"] and "1 by their kernel" in trace.meta.notes["op_names"]


def test_without_op_names_gpu_work_keeps_kernel_names() -> None:
    raw = trace_from_kineto(event_table([e for e in _events() if e.cat != "cpu_op"], pid=1))
    trace = enrich(raw, FACTS, RunMeta.new())
    kernels = trace.intervals[trace.intervals["kind"] == "kernel"]
    assert set(kernels["name"].astype(str)) == {KERNEL}


def test_lazy_kernel_loading_is_labelled_first_call_set_up() -> None:
    events = [*_events(), FakeEvent("cuda_driver", "Lazy Function Loading", 101, 109, corr=-1)]
    trace = enrich(trace_from_kineto(event_table(events, pid=1)), FACTS, RunMeta.new())
    iv = trace.intervals
    setup = iv[iv["name"] == "first-call set-up: Lazy Function Loading"]
    assert len(setup) == 1 and setup.iloc[0]["lane_label"] == "main thread"


def test_steps_annotations_links_and_labels() -> None:
    trace = _recorded(FACTS)
    iv = trace.intervals
    kernels = iv[iv["kind"] == "kernel"].sort_values("start_ns")
    assert list(kernels["step"]) == [0, 1]  # GPU work belongs to the step that launched it
    assert list(trace.steps()["step"]) == [0, 1]
    ann = iv[iv["kind"] == "annotation"]
    assert list(ann["name"].astype(str)) == ["forward"] and ann.iloc[0]["lane_label"] == "main thread"
    ids = dict(zip(iv["id"], iv["name"].astype(str), strict=True))
    assert all(ids[lid] == "cudaLaunchKernel" for lid in kernels["launch_id"])
    assert list(iv["id"]) == list(range(len(iv)))
    assert iv["start_ns"].is_monotonic_increasing
    labels = {ln.label for ln in trace.lanes}
    assert "main thread" in labels and "stream 9 prefetch (transfer)" in labels


def test_a_collection_is_a_row_on_the_main_thread_and_cuts_the_sampled_stretch() -> None:
    """What the recorder hands enrich for a full collection (timed by collector.recording.gcspans, put on the
    main thread, the sampled stretch across it cut): an annotation row on the main thread's lane and, on the
    sampled lane, the collection's part of the stretch with the collection as its innermost frame."""
    collections = gcspans.moved([(TID + 1, 2, 600, 900)], to=TID, away_from={TID + 1})  # the sampler's thread
    samples = gcspans.split_samples([(500, 1000, "main (train.py:1)")], collections, TID)
    facts = dataclasses.replace(
        FACTS,
        annotations=[*FACTS.annotations, *gcspans.as_annotations(collections)],
        samples=samples,
        sampled_thread=TID,
    )
    iv = _recorded(facts).intervals
    names = iv["name"].astype(str)
    row = iv[(iv["kind"] == "annotation") & (names == gcspans.label(2))]
    assert len(row) == 1 and row.iloc[0]["lane_label"] == "main thread"
    assert (row.iloc[0]["start_ns"], row.iloc[0]["end_ns"]) == (600, 900)
    sampled = iv[iv["kind"] == "sample"].sort_values("start_ns")
    assert list(zip(sampled["start_ns"], sampled["end_ns"], sampled["name"].astype(str), strict=True)) == [
        (500, 600, "main (train.py:1)"),
        (600, 900, f"main (train.py:1);{gcspans.label(2)}"),
        (900, 1000, "main (train.py:1)"),
    ]


def test_dropped_windows_remove_host_rows_and_the_gpu_work_they_launched() -> None:
    """Skipped steps (``every``) and the recorder's own calls (stream tag, final wait) leave no rows; the
    stream tag still names its stream."""
    facts = HostFacts(
        markers=[("step", "step 0", 0, 500, 0)],
        stream_tags=[(1499, 1506, "prefetch")],
        dropped=[(900, 1499), (1499, 1506)],
    )
    iv = _recorded(facts).intervals
    assert sorted(iv["start_ns"]) == [95, 96, 100, 120, 200, 210, 400]  # the later launch, kernel and tag gone
    assert "stream 9 prefetch (transfer)" in {ln.label for ln in _recorded(facts).lanes}
    keep_all = _recorded(HostFacts(markers=facts.markers, stream_tags=facts.stream_tags)).intervals
    assert len(keep_all) == len(iv) + 4


def test_clock_line_maps_monotonic_to_wall_through_two_pairs() -> None:
    line = ClockLine((1_000, 5_000_000_000), (2_001_000, 5_002_000_200))
    assert line(1_000) == 5_000_000_000
    assert line(2_001_000) == 5_002_000_200
    assert line(1_001_000) == 5_001_000_100


@pytest.mark.parametrize("queued", [False, True])
def test_events_mode_starts_never_precede_the_launch(queued: bool) -> None:
    """A drained stream: the start event ran at once, long before the host launched the kernel."""
    host = [(1, "cpu_op", "aten::mul_", 1_000, 50_000, 0, "", False, 0, "", "", 0)]
    start_ms = 0.060 if queued else 0.0  # event ms after the anchor at host 0
    gpu = [((0, 7), "kernel", "aten::mul_", start_ms, 0.070, 0, "", False, 0, 0, 1)]
    trace = build_trace(RunMeta.new(), 0, host, gpu, [], {1: "main thread"}, {}, ClockMap(0))
    k = trace.intervals[trace.intervals["kind"] == "kernel"].iloc[0]
    assert k["start_ns"] == (60_000 if queued else 50_000)
    assert k["end_ns"] == 70_000


def test_events_traces_of_short_intervals_on_drained_streams_say_busy_time_is_overstated() -> None:
    host = [(1, "cpu_op", "aten::mul_", i * 20_000, i * 20_000 + 5_000, 0, "", False, 0, "", "", i) for i in range(10)]

    def trace_of(queued: bool) -> Trace:
        gpu = [
            (
                (0, 7),
                "kernel",
                "aten::mul_",
                (i * 20 + (6 if queued else 1)) / 1e3,
                (i * 20 + 9) / 1e3,
                0,
                "",
                False,
                0,
                i,
                100 + i,
            )
            for i in range(10)
        ]
        meta = RunMeta.new(notes={"timing": "events", "timing_note": "events note"})
        return build_trace(meta, 0, host, gpu, [], {1: "main thread"}, {}, ClockMap(0))

    drained = trace_of(queued=False).meta.notes
    assert drained["drained_share"] == 1.0
    assert drained["timing_note"].startswith(
        "events note; 100% of GPU intervals ran on a drained stream and last 4.0 us"
    )
    assert "drained_share" not in trace_of(queued=True).meta.notes


def test_launch_end_lookup_handles_unknown_launches() -> None:
    host_cols = [(), (), (), (), (10, 20), (), (), (), (), (), (), (5, 9)]
    out = launch_end_ns(host_cols, [9, 5, -1, 7])
    assert out[:2].tolist() == [20, 10]
    assert (out[2:] == np.iinfo(np.int64).min).all()


def test_an_empty_last_step_is_dropped_and_its_host_rows_join_the_tail() -> None:
    facts = HostFacts(markers=[*FACTS.markers, ("step", "step 2", 2000, 3000, 2)])
    raw = trace_from_kineto(
        event_table([*_events(), FakeEvent("cuda_runtime", "cudaDeviceSynchronize", 2100, 2200, corr=9)], pid=1)
    )
    trace = drop_empty_last_step(enrich(raw, facts, RunMeta.new()), 2)
    assert list(trace.steps()["step"]) == [0, 1]
    sync = trace.intervals[trace.intervals["name"] == "cudaDeviceSynchronize"].iloc[0]
    assert sync["step"] == -1
    assert drop_empty_last_step(trace, 1) is trace  # step 1 launched GPU work: kept


def test_innermost_enclosing_walks_out_past_ended_children() -> None:
    from collector.recording.gpunames import innermost_enclosing

    key = np.array([1, 1, 1, 1, 2])
    start = np.array([0, 10, 12, 30, 0])
    end = np.array([100, 50, 20, 40, 100])  # [0 [10 [12 20] 50] [30 40] 100] on key 1; [0 100] on key 2
    pts_key = np.array([1, 1, 1, 1, 2, 3])
    pts_t = np.array([15, 25, 45, 60, 5, 5])
    assert innermost_enclosing(key, start, end, pts_key, pts_t).tolist() == [2, 1, 1, 0, 4, -1]


def test_stop_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sys

    from collector.recording.cupti_recorder import _progress

    _progress("quiet in a pipe")
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    _progress("reading records")
    assert "streamscope: reading records" in capsys.readouterr().err


def test_a_wait_just_outside_its_span_still_takes_its_line() -> None:
    """Kineto's host clock and the recorder's differ by microseconds: a short call's wait that starts just
    after its span ended still gets the span's cause and line; one far away does not."""
    near = HostFacts(spans=[(TID, "synchronize", 390, 399, "train.py:7", 0)], threads={TID: "main thread"})
    far = HostFacts(
        spans=[(TID, "synchronize", 390 - 50_000, 399 - 50_000, "train.py:7", 0)], threads={TID: "main thread"}
    )
    for facts, expected in ((near, "train.py:7"), (far, "")):
        iv = _recorded(facts).intervals
        wait = iv[(iv["kind"] == "sync_wait") & (iv["name"] == "cudaStreamSynchronize")]
        assert wait["source"].astype(str).tolist() == [expected]


def test_a_gpu_side_range_takes_the_step_of_the_work_it_covers() -> None:
    """The GPU runs behind the host: a range on the stream after the step's host window ended still belongs
    to the step that launched the work inside it."""
    events = [*_events(), FakeEvent("gpu_user_annotation", "fwd", 1015, 1035, stream=7)]
    raw = trace_from_kineto(event_table(events, pid=1))
    facts = HostFacts(markers=[("step", "step 0", 0, 1005, 0)], threads={TID: "main thread"})
    iv = enrich(raw, facts, RunMeta.new(workload="t", clock="unix_ns")).intervals
    ranges = iv[(iv["kind"] == "annotation") & (iv["lane_kind"] != "cpu_thread")]
    assert ranges["name"].astype(str).tolist() == ["fwd"] and ranges["step"].tolist() == [0]


def test_windows_with_no_host_row_inside_leave_the_frame_as_it_is() -> None:
    """The usual stop (the recorder's own calls left no records): the frame comes back untouched, whether its
    rows are in start order (binary search) or not (a pass over them); GPU rows in a window stay."""
    from collector.recording.dropped import without_windows

    frame = pd.DataFrame(
        {
            "start_ns": [10, 20, 30, 40],
            "end_ns": [15, 25, 35, 45],
            "lane": [0, 1, 0, 1],
            "id": [0, 1, 2, 3],
            "launch_id": [-1, 0, -1, 2],
            "kind": ["launch", "kernel", "launch", "kernel"],
        }
    )
    host_lane = np.array([True, False, False])
    assert without_windows(frame, [(18, 26)], host_lane) is frame  # only a kernel starts inside
    shuffled = frame.iloc[[2, 0, 3, 1]].reset_index(drop=True)
    assert without_windows(shuffled, [(18, 26)], host_lane) is shuffled
    for rows in (frame, shuffled):
        kept = without_windows(rows, [(28, 31)], host_lane)  # the second launch and its kernel go
        assert sorted(kept["start_ns"]) == [10, 20]


def test_the_plain_op_time_is_kept_from_before_the_process_s_first_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUPTI leaves launches slower once attached: a plain timing is kept only when taken before any capture,
    and reused by later recordings (which then time only the recorded side)."""
    import contextlib
    from types import SimpleNamespace

    from collector.recording import cupti_recorder as cr

    timings = iter([6000.0, 7100.0, 7000.0])
    monkeypatch.setattr(cr, "tiny_op_ns", lambda: next(timings))
    monkeypatch.setattr(cr, "_PLAIN_OP_NS", {})
    fake = SimpleNamespace(_device=0, _torch=SimpleNamespace(cuda=SimpleNamespace(device=contextlib.nullcontext)))
    monkeypatch.setattr(cr, "_CAPTURED", False)
    assert cr.CuptiRecorder._plain_op_ns(fake) == 6000.0  # type: ignore[arg-type]
    monkeypatch.setattr(cr, "_CAPTURED", True)
    assert cr.CuptiRecorder._plain_op_ns(fake) == 6000.0  # type: ignore[arg-type]  # kept: not timed again
    fake._device = 1  # a device never timed before a capture: timed now, and not kept
    assert [cr.CuptiRecorder._plain_op_ns(fake) for _ in range(2)] == [7100.0, 7000.0]  # type: ignore[arg-type]


def test_a_calibration_that_reads_no_cost_times_the_recorded_op_once_more(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording cannot make a call cheaper: a recorded timing at or under the plain one is timed again, and
    where it is again, the cost is 0 (nothing taken out), never negative."""
    import contextlib
    from types import SimpleNamespace

    from collector.recording import cupti_recorder as cr

    fake = SimpleNamespace(_device=0, _torch=SimpleNamespace(cuda=SimpleNamespace(device=contextlib.nullcontext)))
    for timed, cost in (([9000.0], 3000.0), ([5900.0, 8500.0], 2500.0), ([6000.0, 5000.0], 0.0)):
        timings = iter(timed)
        monkeypatch.setattr(cr, "tiny_op_ns", lambda timings=timings: next(timings))
        assert cr.CuptiRecorder._call_cost_ns(fake, 6000.0) == cost  # type: ignore[arg-type]
        assert next(timings, None) is None  # timed once where the first timing read a cost, else twice


NONZERO = "void at::cuda::nonzero_kernel<bool>"
US = 1000
STEPS = [("step", "step 0", 0, 900 * US, 0), ("step", "step 1", 900 * US, 2000 * US, 1)]


def _masked_events(at: tuple[int, ...] = (100, 1000)) -> list[FakeEvent]:
    """A boolean-mask index at each time of ``at`` (us): its kernel, a copy of the count to pinned memory and
    the stream's synchronize (the wait); ops were named in step 0 only. Then an ``add`` kernel and a wait no
    span explains. Times in us, so that the spans' slack (20 us) reaches no other call."""
    rows = [FakeEvent("cpu_op", "aten::index", 95, 800)]
    for i, t in enumerate(at):
        corr = 3 * i + 1
        rows += [
            FakeEvent("cuda_runtime", "cudaLaunchKernel", t, t + 10, corr=corr),
            FakeEvent("kernel", NONZERO, t + 20, t + 40, corr=corr, stream=7),
            FakeEvent("cuda_runtime", "cudaMemcpyAsync", t + 50, t + 60, corr=corr + 1),
            FakeEvent("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", t + 60, t + 90, corr=corr + 1, stream=7),
            FakeEvent("cuda_runtime", "cudaStreamSynchronize", t + 60, t + 200, corr=corr + 2),
        ]
    rows += [
        FakeEvent("cuda_runtime", "cudaLaunchKernel", 1500, 1510, corr=90),
        FakeEvent("kernel", KERNEL, 1520, 1530, corr=90, stream=7),
        FakeEvent("cuda_runtime", "cudaStreamSynchronize", 1600, 1700, corr=91),
    ]
    for e in rows:
        e.start, e.end = e.start * US, e.end * US
    return rows


def _mask_waits(events: list[FakeEvent], spans: list[tuple[int, str, int, int, str, int]]) -> list[tuple]:
    spans = [(tid, c, a * US, b * US, line, n) for tid, c, a, b, line, n in spans]
    facts = HostFacts(spans=spans, markers=STEPS, threads={TID: "main thread"})
    raw = trace_from_kineto(event_table(events, pid=1))
    iv = enrich(raw, facts, RunMeta.new(workload="t", clock="unix_ns", notes={"timing": "cupti"})).intervals
    waits = iv[iv["kind"] == "sync_wait"].sort_values("start_ns")
    return list(zip(waits["step"], waits["cause"].astype(str), waits["source"].astype(str), strict=True))


def test_later_mask_waits_take_the_cause_and_line_of_the_first_steps() -> None:
    assert _mask_waits(_masked_events(), [(TID, "masked_index", 90, 310, "train.py:9", 0)]) == [
        (0, "masked_index", "train.py:9"),
        (1, "masked_index", "train.py:9"),  # no span: told by the op its kernel ran for
        (1, "stream_synchronize", ""),  # after another op's kernel: as the runtime call says
    ]


def test_mask_waits_of_two_lines_lend_the_cause_but_no_line() -> None:
    spans = [(TID, "masked_index", 90, 310, "train.py:9", 0), (TID, "masked_index", 390, 610, "train.py:10", 0)]
    assert _mask_waits(_masked_events((100, 400, 1000)), spans) == [
        (0, "masked_index", "train.py:9"),
        (0, "masked_index", "train.py:10"),
        (1, "masked_index", ""),
        (1, "stream_synchronize", ""),
    ]


def test_without_a_mask_in_the_first_step_later_waits_keep_the_runtime_cause() -> None:
    waits = _mask_waits(_masked_events((1000,)), [(TID, "item", 1600, 1710, "train.py:20", 0)])
    assert waits == [(1, "stream_synchronize", ""), (1, "item", "train.py:20")]
