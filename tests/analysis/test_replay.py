"""The dependency graph and its replay on hand-made runs whose step times are worked out by hand."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from analysis_traces import COMPUTE, CPU, MS, US, iv, pageable_run, steps, trace

from collector.load import load_trace
from collector.model import IntervalKind, Trace
from webapp.analysis.causal import CausalModel, causal_model, fixes
from webapp.analysis.causal.critical import PARTS
from webapp.analysis.causal.graph import Graph
from webapp.analysis.causal.replay import replay
from webapp.analysis.causal.stepmap import step_times
from webapp.analysis.context import RunData, prepare

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_traces").glob("*.json.gz"))


def _model(t: Trace) -> tuple[RunData, CausalModel]:
    rd = prepare(t)
    return rd, causal_model(rd)


def _parts(cm: CausalModel, step: int) -> dict[str, int]:
    return dict(zip(PARTS, cm.critical[step].tolist(), strict=True))


def _steps_after(rd: RunData, cm: CausalModel, change: Callable[[Graph], Graph]) -> np.ndarray:
    changed = change(cm.graph)
    return step_times(rd, cm.steps, replay(changed), changed.g_stream)


def gpu_bound(n: int = 5) -> Trace:
    """A host that runs ahead: a 5 us launch every 1 ms, each of a 10 ms kernel."""
    rows = []
    for k in range(n):
        rows += [
            iv(CPU, "launch", k * MS, k * MS + 5 * US, id=2 * k, step=k),
            iv(
                COMPUTE,
                "kernel",
                k * 10 * MS + 10 * US,
                (k + 1) * 10 * MS + 10 * US,
                "gemm",
                launch_id=2 * k,
                id=2 * k + 1,
                step=k,
            ),
        ]
    return trace(rows, steps(*[(k * MS, (k + 1) * MS) for k in range(n)]))


def host_bound(n: int = 5) -> Trace:
    """8 ms of host work per step, then a 5 us launch of a 2 ms kernel that starts 10 us after it."""
    rows = []
    for k in range(n):
        t = k * 8 * MS
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=2 * k, step=k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 2 * MS + 10 * US, "gemm", launch_id=2 * k, id=2 * k + 1, step=k),
        ]
    return trace(rows, steps(*[(k * 8 * MS, (k + 1) * 8 * MS) for k in range(n)]))


def drained(n: int = 12) -> Trace:
    """Per 11.02 ms step: launch an 8 ms kernel, wait for it (item), then 3 ms of host work."""
    rows, marks = [], []
    for k in range(n):
        t = k * 11_020 * US
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=3 * k, step=k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 8 * MS + 10 * US, "gemm", launch_id=3 * k, id=3 * k + 1, step=k),
            iv(
                CPU,
                "sync_wait",
                t + 10 * US,
                t + 8 * MS + 20 * US,
                "cudaStreamSynchronize",
                cause="item",
                source="l.py:3",
                id=3 * k + 2,
                step=k,
            ),
        ]
        marks.append((t, t + 11_020 * US))
    return trace(rows, steps(*marks))


def serial_copy(n: int = 6) -> Trace:
    """Per step on one stream: a pinned 64 MiB copy (1.25 ms) then an 8 ms kernel; the host runs ahead."""
    rows = []
    for k in range(n):
        t = k * 9_252 * US
        h = k * 100 * US
        rows += [
            iv(CPU, "launch", h, h + 5 * US, "cudaMemcpyAsync", id=4 * k, step=k),
            iv(
                COMPUTE,
                "memcpy_h2d",
                t + 10 * US,
                t + 1_260 * US,
                "copy",
                bytes=64 << 20,
                memory_kind="pinned",
                non_blocking=True,
                launch_id=4 * k,
                source="d.py:5",
                id=4 * k + 1,
                step=k,
            ),
            iv(CPU, "launch", h + 10 * US, h + 15 * US, id=4 * k + 2, step=k),
            iv(COMPUTE, "kernel", t + 1_261 * US, t + 9_261 * US, "gemm", launch_id=4 * k + 2, id=4 * k + 3, step=k),
        ]
    return trace(rows, steps(*[(k * 100 * US, (k + 1) * 100 * US) for k in range(n)]))


@pytest.mark.parametrize("make", [gpu_bound, host_bound, drained, serial_copy])
def test_unchanged_replay_reproduces_every_time(make: Callable[[], Trace]) -> None:
    rd, cm = _model(make())
    rep = replay(cm.graph)
    assert (rep.g_start == cm.graph.g_start).all() and (rep.g_end == cm.graph.g_end).all()
    assert (rep.h_start == cm.graph.h_start).all() and (rep.h_end == cm.graph.h_end).all()
    assert (cm.raw_steps == rd.win.ends - rd.win.starts).all() and cm.error.max() == 0


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_samples_replay_within_two_percent(path: Path) -> None:
    rd, cm = _model(load_trace(path))
    assert len(cm.error) and cm.error.max() <= 0.02
    assert cm.notes[0].startswith("Replay self-check: the dependency graph reproduces every step")
    # the critical path accounts for every step's time, and is drawn as it is counted
    measured = rd.win.ends - rd.win.starts
    assert (cm.critical.sum(axis=1) == measured).all()
    _drawn_as_counted(cm)


def _drawn_as_counted(cm: CausalModel) -> None:
    """The path's stretches add up, part by part, to the critical-path ns of every part drawn on a lane."""
    drawn = (cm.path["end_ns"] - cm.path["start_ns"]).groupby(cm.path["part"].astype(str)).sum()
    for i, part in enumerate(PARTS[:-1]):  # "other" is before the first node the graph knows: on no lane
        assert int(drawn.get(part, 0)) == int(cm.critical[:, i].sum()), part


def test_a_run_of_copies_and_kernels_on_one_stream_is_drawn_as_each() -> None:
    rd, cm = _model(serial_copy())
    copy, compute = PARTS.index("copy"), PARTS.index("compute")
    assert cm.critical[:, copy].sum() > 0 and cm.critical[:, compute].sum() > 0
    _drawn_as_counted(cm)


def test_ops_that_overlap_on_one_stream_are_not_counted_twice() -> None:
    """A trace whose stream shows a kernel starting 2 us before the previous one ended (clock jitter)."""
    rows = []
    for k in range(4):
        t = k * 10 * MS
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=3 * k, step=k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 5 * MS, "a", launch_id=3 * k, id=3 * k + 1, step=k),
            iv(COMPUTE, "kernel", t + 5 * MS - 2 * US, t + 10 * MS + 10 * US, "b", id=3 * k + 2, step=k),
        ]
    rd, cm = _model(trace(rows, steps(*[(k * 10 * MS + 10 * US, (k + 1) * 10 * MS + 10 * US) for k in range(4)])))
    assert (cm.critical.sum(axis=1) == rd.win.ends - rd.win.starts).all()
    _drawn_as_counted(cm)


@pytest.mark.parametrize(("gap_us", "other_us"), [(20, 0), (3_000, 3_000)])
def test_a_gap_between_queued_kernels_is_the_gpu_s_only_while_short(gap_us: int, other_us: int) -> None:
    """Each 10 ms step: kernels a and b, all launched up front, b starting ``gap_us`` after a ends with nothing
    in the trace to say why. A short gap is the GPU's own scheduling (held by the kernel before it), a long one
    is other, and the path drawn on the stream leaves it out."""
    rows = []
    for k in range(3):
        t = k * 10 * MS + 10 * US
        rows += [
            iv(CPU, "launch", 8 * k * US, 8 * k * US + 4 * US, id=4 * k, step=k),
            iv(CPU, "launch", 8 * k * US + 4 * US, 8 * k * US + 8 * US, id=4 * k + 1, step=k),
            iv(COMPUTE, "kernel", t + 1 * US, t + 5 * MS, "a", launch_id=4 * k, id=4 * k + 2, step=k),
            iv(
                COMPUTE, "kernel", t + 5 * MS + gap_us * US, t + 10 * MS, "b", launch_id=4 * k + 1, id=4 * k + 3, step=k
            ),
        ]
    rd, cm = _model(trace(rows, steps(*[(k * 10 * MS, (k + 1) * 10 * MS) for k in range(3)])))
    parts = _parts(cm, 1)
    assert parts["other"] == other_us * US
    assert parts["compute"] == 10 * MS - other_us * US
    assert (cm.critical.sum(axis=1) == rd.win.ends - rd.win.starts).all()
    _drawn_as_counted(cm)


def test_gpu_bound_steps_are_gpu_on_the_critical_path_and_a_faster_host_saves_nothing() -> None:
    rd, cm = _model(gpu_bound())
    assert _parts(cm, 1)["compute"] == 10 * MS
    faster = _steps_after(rd, cm, fixes.faster_host)
    assert (faster == cm.base_steps).all()


def test_host_bound_steps_are_host_work_and_the_bound_is_the_gpu() -> None:
    rd, cm = _model(host_bound())
    parts = _parts(cm, 1)
    assert parts["launch"] == 5 * US and parts["host"] == 8 * MS - 5 * US  # the 5 us launch call is host
    faster = _steps_after(rd, cm, fixes.faster_host)
    # every launch at once: kernels back to back, a 1 us bubble apart
    assert faster[1] == 2 * MS + 1 * US


def test_a_drained_sync_costs_the_host_work_behind_it_when_the_gpu_bounds_the_step() -> None:
    rd, cm = _model(drained())
    parts = _parts(cm, 1)
    # the step: 8 ms kernel, 10 us wake-up, 3 ms host work and the 5 us launch call, 5 us launch latency
    parts_expected = {"compute": 8 * MS, "sync": 10 * US, "host": 3 * MS + 5 * US, "launch": 5 * US}
    assert parts == {**dict.fromkeys(PARTS, 0), **parts_expected}
    waits = np.flatnonzero(cm.graph.h_wait)
    after = _steps_after(rd, cm, lambda g: fixes.drop_waits(g, waits))
    # without the wait the host issues each 8 ms kernel 3.01 ms after the last: the GPU bounds the step
    assert after[3] == 8 * MS + 1 * US


def test_a_drained_sync_saves_nothing_when_the_host_bounds_the_step() -> None:
    rows, marks = [], []
    for k in range(6):  # 1 ms kernel, wait for it, then 6 ms of host work: the host bounds the step
        t = k * 7_020 * US
        rows += [
            iv(CPU, "launch", t, t + 5 * US, id=3 * k, step=k),
            iv(COMPUTE, "kernel", t + 10 * US, t + 1 * MS + 10 * US, "k", launch_id=3 * k, id=3 * k + 1, step=k),
            iv(CPU, "sync_wait", t + 10 * US, t + 1 * MS + 20 * US, "sync", cause="item", id=3 * k + 2, step=k),
        ]
        marks.append((t, t + 7_020 * US))
    rd, cm = _model(trace(rows, steps(*marks)))
    waits = np.flatnonzero(cm.graph.h_wait)
    saved = cm.base_steps - _steps_after(rd, cm, lambda g: fixes.drop_waits(g, waits))
    # only the host's 1.01 ms in the wait goes: 6.01 ms of host work a step remain
    assert saved[2] == 1_010 * US


def test_prefetch_on_a_side_stream_hides_the_copy() -> None:
    rd, cm = _model(serial_copy())
    g = cm.graph
    assert _parts(cm, 2)["copy"] == 1_251 * US  # the copy and the bubble before the kernel behind it
    copies = np.flatnonzero(g.g_bytes > 0)
    after = _steps_after(rd, cm, lambda graph: fixes.prefetch(graph, copies, np.zeros(len(copies), dtype=np.int64)))
    # each step's kernel follows the previous one (1 us bubble); its copy ran a step earlier on its own stream
    assert after[3] == 8 * MS + 1 * US


def test_a_longer_blocking_copy_holds_the_host_as_long() -> None:
    """A blocking 12 ms pageable copy, then a 16 ms kernel: the copy 2 ms longer (its source pages faulted in)
    holds the host 2 ms longer, and the step with it; the copy of a step that is not lengthened keeps its time."""
    rd, cm = _model(pageable_run(4))
    ups = np.flatnonzero(cm.graph.g_bytes > 0)
    after = _steps_after(rd, cm, lambda g: fixes.lengthen(g, ups[:2], np.full(2, 2 * MS)))
    assert after[0] - cm.base_steps[0] == 2 * MS and after[1] - cm.base_steps[1] == 2 * MS
    assert after[3] == cm.base_steps[3]
    assert (fixes.lengthen(cm.graph, ups, np.full(len(ups), -MS)).g_dur == cm.graph.g_dur).all()  # never shorter


def test_captured_launches_cost_one_graph_launch() -> None:
    rows = []
    for i in range(100):  # 20 us of host per launch, 2 us kernels: launch-bound
        t = i * 20 * US
        rows += [
            iv(CPU, "launch", t, t + 8 * US, id=2 * i, step=i // 50),
            iv(COMPUTE, "kernel", t + 10 * US, t + 12 * US, "tiny", launch_id=2 * i, id=2 * i + 1, step=i // 50),
        ]
    rd, cm = _model(trace(rows, steps((0, 50 * 20 * US), (50 * 20 * US, 100 * 20 * US))))
    g = cm.graph
    step = rd.step_win(g.h_row)
    captured = fixes.captured(g, np.arange(g.n_host), step)
    # one graph launch per step: the host time between the launches of a step is gone
    assert (captured.h_delta == np.where(np.arange(100) % 50 == 0, g.h_delta + fixes.GRAPH_LAUNCH_NS, 0)).all()
    after = step_times(rd, cm.steps, replay(captured))
    assert after[0] == 50 * 2 * US + 50 * fixes.GRAPH_BUBBLE_NS  # the 50 kernels of one graph, closely packed


def full_queue(n: int = 10) -> Trace:
    """A host two kernels ahead of a GPU that runs 10 ms kernels: from the third, each launch blocks until the
    kernel two before it ends (the launch queue is full)."""
    rows, marks = [], []
    k_end = 0
    ends: list[int] = []
    h = 0
    for k in range(n):
        call_end = h + 5 * US if k < 2 else max(h + 5 * US, ends[k - 2] + 5 * US)
        rows.append(iv(CPU, "launch", h, call_end, "cudaLaunchKernel", id=2 * k, step=k))
        start = max(k_end, call_end + 5 * US)
        k_end = start + 10 * MS
        ends.append(k_end)
        rows.append(iv(COMPUTE, "kernel", start, k_end, "gemm", launch_id=2 * k, id=2 * k + 1, step=k))
        marks.append((start, k_end))
        h = call_end + 5 * US
    return trace(rows, steps(*marks))


def test_a_launch_held_by_a_full_queue_waits_for_the_gpu_not_host_work() -> None:
    rd, cm = _model(full_queue())
    g = cm.graph
    blocked = g.h_wait & ~g.h_sync
    assert blocked.sum() == 8 and not g.h_sync.any()  # the launches from the third on
    assert (replay(g).h_end == g.h_end).all()
    # a GPU twice as fast: every step takes half as long, not only while the host's lead lasts
    halved = _steps_after(rd, cm, lambda gr: replace(gr, g_dur=gr.g_dur // 2))
    assert np.abs(halved[1:] - 5 * MS).max() <= 50 * US
    # the host's own work is not what bounds these steps
    assert cm.critical[:, PARTS.index("host")].sum() == 0


def _copy_opened(n: int = 4) -> Trace:
    """Per 18 ms step: a 2 ms upload opens the step on the compute stream, a 5 ms kernel, then an 11 ms
    download the host waits for (``.cpu()``), all tagged with their step; the next step's upload follows."""
    rows = []
    for k in range(n):
        t, i = k * 18 * MS, 10 * k
        rows += [
            iv(CPU, "launch", t, t + 5 * US, "cudaMemcpyAsync", id=i, step=k),
            iv(COMPUTE, "memcpy_h2d", t + 10 * US, t + 2 * MS, "up", bytes=1 << 20, launch_id=i, id=i + 1, step=k),
            iv(CPU, "launch", t + 10 * US, t + 15 * US, id=i + 2, step=k),
            iv(COMPUTE, "kernel", t + 2 * MS, t + 7 * MS, "gemm", launch_id=i + 2, id=i + 3, step=k),
            iv(CPU, "sync_wait", t + 20 * US, t + 18 * MS - 10 * US, "aten::to", cause="cpu", id=i + 4, step=k),
            iv(
                COMPUTE,
                "memcpy_d2h",
                t + 7 * MS,
                t + 18 * MS - 20 * US,
                "down",
                bytes=64 << 20,
                memory_kind="pageable",
                launch_id=i + 4,
                id=i + 5,
                step=k,
            ),
        ]
    return trace(rows, steps(*[(k * 18 * MS, (k + 1) * 18 * MS) for k in range(n)]))


def test_a_step_opened_by_a_copy_keeps_its_own_saving() -> None:
    """Each step's download is sped up in the replay: the step whose download it is gets the saving, not the
    next one (the window still opens at its upload, which moves with the run)."""
    rd, cm = _model(_copy_opened())
    assert rd.step_basis == "gpu" and rd.win.starts[1] == 18 * MS + 10 * US  # the upload opens the step
    downloads = np.flatnonzero(rd.kind[cm.graph.g_row] == rd.code(IntervalKind.MEMCPY_D2H))
    saved = cm.base_steps - _steps_after(rd, cm, lambda g: fixes.pin_copies(g, downloads, 53.7))
    assert saved[0] > 8 * MS and saved[:-1] == pytest.approx([saved[0]] * (len(saved) - 1), rel=0.01)


def test_gpu_work_without_launch_links_moves_with_the_host_around_it() -> None:
    """A host-bound loop whose trace links no kernel to its launch: the kernels keep their distance from the
    host's calls before them, so cutting the host's time between launches still shortens the steps."""
    t = host_bound()
    t = replace(t, intervals=t.intervals.assign(launch_id=-1))
    rd, cm = _model(t)
    assert cm.graph.linked_frac == 0
    saved = cm.base_steps - _steps_after(rd, cm, fixes.faster_host)
    assert saved[:-1] == pytest.approx([6 * MS - 10 * US] * (len(saved) - 1), abs=20 * US)


def test_a_collective_the_backend_starts_just_after_its_enqueue_holds_the_host() -> None:
    """The issuing thread enqueues a collective (its call ends at 0.1 ms), the backend's thread starts it
    33 us later and runs it to 20 ms, and the thread's next call comes 0.2 ms after that: it waited for it
    (work.wait()), though the collective was not yet running when the thread's last call ended."""
    from webapp.analysis.causal.graph import _collective_holds

    us = np.int64(US)
    h_rank, h_start, h_end = np.zeros(2, np.int64), np.array([0, 20_200]) * us, np.array([100, 20_210]) * us
    g_rank, g_start, g_end = np.zeros(1, np.int64), np.array([133]) * us, np.array([20_000]) * us
    held, on = _collective_holds(h_rank, h_start, h_end, np.zeros(2, bool), g_rank, g_start, g_end, np.ones(1, bool))
    assert held.tolist() == [True, False] and on.tolist() == [0, -1]


@pytest.mark.parametrize("call_ns", [None, 0, 2000])
def test_the_recorder_s_cost_is_said_taken_out_or_unmeasured(call_ns: int | None) -> None:
    """A recording that timed its own cost says it took it out, and what it leaves in; one whose timing read
    none says its times include it; a trace without the note (an import) says neither."""
    t = host_bound()
    notes = {} if call_ns is None else {"recorder_call_ns": call_ns}
    _, cm = _model(replace(t, meta=replace(t.meta, notes={**t.meta.notes, **notes})))
    said = " ".join(cm.notes)
    assert ("is taken out of every call" in said) == (call_ns == 2000)
    assert ("stays in" in said and "read high" in said) == (call_ns == 2000)  # what the timing leaves in
    assert ("could not be measured" in said) == (call_ns == 0)
    assert cm.recorder_call_ns == (call_ns or 0)
