"""Host time by Python frame from sampled stacks, and the host-bound finding's DataLoader fix."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from analysis_traces import COMPUTE, CPU, FORWARD, LOADING, LOOP, MS, SAMPLES, US, iv, lanes, loader_bound, steps

from collector.model import Lane, LaneKind, RunMeta, Trace
from collector.recording.gcspans import label
from webapp.analysis import analyze
from webapp.analysis.context import RunData
from webapp.analysis.rules.host_bound import LOADER_SLOWDOWN, LOADER_SLOWDOWN_MOST, SHM_FAULT_NS_PER_4KIB


def test_frame_table_has_self_and_total_time_per_frame() -> None:
    table = analyze(loader_bound()).host_frames.set_index("frame")
    # the step windows follow the GPU (kernel to kernel): the samples of steps 1-5 fall in windows 0-4
    loading, forward = "__next__ (torch/utils/data/dataloader.py:701)", "forward (model.py:12)"
    assert table.loc[loading, "total_ns"] == 5 * 6 * MS and table.loc[loading, "self_ns"] == 0
    assert table.loc["_next_data (torch/utils/data/dataloader.py:757)", "self_ns"] == 5 * 6 * MS
    assert table.loc[forward, "total_ns"] == table.loc[forward, "self_ns"] == 5 * 2 * MS
    assert table.loc["train_epoch (train.py:30)", "total_frac"] == pytest.approx(1.0)
    assert table.loc[loading, "total_frac"] == pytest.approx(0.75)
    assert "sample" not in set(analyze(loader_bound()).kernels["kind"])  # stacks are this table's, not the ops'


def test_host_bound_names_the_loader_and_replays_more_workers() -> None:
    result = analyze(loader_bound())
    f = {x.rule: x for x in result.findings}["host-bound"]
    assert "_next_data (torch/utils/data/dataloader.py:757)" in f.detail and "forward (model.py:12)" in f.detail
    # 6 ms of loading for 2 ms of the rest: workers 2x slower would need 6 of them; the next power of two is
    # advised (the trace does not say how many CPUs the host has: at most 8)
    assert "DataLoader(num_workers=8)" in f.fix and "2x slower" in f.detail
    assert f"each loads {LOADER_SLOWDOWN:.2f}x slower than this process did" in f.detail  # the replay's pace
    # at the slowest pace seen, eight workers deliver a batch every 6 x 2.85 / 8 = 2.14 ms: the step is
    # theirs, 0.14 ms over the 2 ms of forward, in the five windows the samples cover of six
    slow = re.search(r"slower workers save less \(([0-9.]+) ms per step at 2\.85x", f.detail)
    assert slow and float(slow.group(1)) == pytest.approx((8 - 6 * LOADER_SLOWDOWN_MOST / 8) * 5 / 6, abs=0.05)
    # eight workers take the 6 ms of loading off each step and deliver a batch every 0.75 ms: the 2 ms of
    # forward bound the step, 8 ms -> 2 ms, in every window but the last (which ends with its kernel)
    assert f.cost_per_step_ns == pytest.approx(6 * MS * 5 / 6, abs=20 * US)
    assert result.what_if["step_time_fixed_ns"] == pytest.approx(2 * MS, abs=20 * US)


def test_a_frame_of_another_file_that_holds_the_time_is_named_with_its_caller() -> None:
    """The user's load_batch spends all its time in a library's decode: the finding names decode, and the
    line of the user's code that called it."""
    stack = f"{LOOP};load_batch (data.py:40);decode (imagelib/core.py:7)"
    result = analyze(loader_bound(loading=stack))
    f = {x.rule: x for x in (*result.findings, *result.minor_findings)}["host-bound"]
    assert "decode (imagelib/core.py:7) in load_batch (data.py:40) 75%" in f.detail


def test_a_host_busy_with_its_own_work_is_told_to_cut_that_work_not_its_launches() -> None:
    """8 ms of the user's Python per step and one launch: CUDA graphs, the only replayed fix, save a launch's
    microseconds of the 7 ms a host with no time of its own would save. The fix leads with the host's own work,
    not with CUDA graphs; where the loading is the DataLoader's, its workers lead."""
    own = analyze(loader_bound(loading=f"{LOOP};load_batch (data.py:40)"))
    f = {x.rule: x for x in (*own.findings, *own.minor_findings)}["host-bound"]
    assert f.fix.startswith("No replayed fix saves much here (CUDA graphs / torch.compile(mode='reduce-overhead')")
    assert "would save 5.83 ms): the host's time per step is its own work" in f.fix
    assert "load_batch (data.py:40)" in f.detail
    loader = {x.rule: x for x in analyze(loader_bound()).findings}["host-bound"]
    assert loader.fix.startswith("Best replayed fix: DataLoader(num_workers=8).")


def test_a_loader_fix_that_saves_next_to_nothing_is_named_without_its_assumptions() -> None:
    """20 us of loading in an 8 ms step of Python: the DataLoader fix is listed with its saving, but the
    paragraph on what its figure assumes is left out."""
    t = loader_bound()
    rows = t.intervals
    loading = (rows["kind"] == "sample") & (rows["name"] == LOADING)
    forward = (rows["kind"] == "sample") & (rows["name"] == FORWARD)
    t.intervals.loc[loading, "end_ns"] = t.intervals.loc[loading, "start_ns"] + 20 * US
    t.intervals.loc[forward, "start_ns"] = t.intervals.loc[forward, "start_ns"] - 6 * MS + 20 * US
    for at in (loading, forward):
        t.intervals.loc[at, "dur_ns"] = t.intervals.loc[at, "end_ns"] - t.intervals.loc[at, "start_ns"]
    result = analyze(t)
    f = {x.rule: x for x in (*result.findings, *result.minor_findings)}["host-bound"]
    assert "DataLoader(num_workers=" in f.detail and "is advised" not in f.detail
    assert "is advised" in {x.rule: x for x in analyze(loader_bound()).findings}["host-bound"].detail


def test_the_loader_fix_is_no_faster_than_its_workers_deliver() -> None:
    """With 1 ms of forward and a host of 3 CPUs, two workers bound the step, not the host: each loads a batch
    in LOADER_SLOWDOWN x 7 ms, so they deliver one every 6.1 ms."""
    t = loader_bound()
    t = t.with_meta(notes={**t.meta.notes, "host_cpus": 3})
    rows = t.intervals
    forward = (rows["kind"] == "sample") & (rows["name"] == FORWARD)
    t.intervals.loc[forward, "start_ns"] = t.intervals.loc[forward, "start_ns"] + 1 * MS
    t.intervals.loc[forward, "dur_ns"] = t.intervals.loc[forward, "end_ns"] - t.intervals.loc[forward, "start_ns"]
    loading = (rows["kind"] == "sample") & (rows["name"] == LOADING)
    t.intervals.loc[loading, "end_ns"] = t.intervals.loc[loading, "end_ns"] + 1 * MS
    t.intervals.loc[loading, "dur_ns"] = t.intervals.loc[loading, "end_ns"] - t.intervals.loc[loading, "start_ns"]
    result = analyze(t)
    assert "DataLoader(num_workers=2)" in {x.rule: x for x in result.findings}["host-bound"].fix
    assert result.what_if["step_time_fixed_ns"] == pytest.approx(LOADER_SLOWDOWN * 7 * MS / 2, abs=20 * US)


def test_the_loader_figure_says_it_is_an_estimate_where_this_process_ran_torch_on_many_threads() -> None:
    """A worker runs torch ops on one thread: where the recorded process ran them on 16, the detail names the
    count and calls the saving an estimate; on one thread (or where the trace does not say) it does not."""
    t = loader_bound()

    def detail(notes: dict[str, int]) -> str:
        result = analyze(t.with_meta(notes={**t.meta.notes, **notes}))
        return {x.rule: x for x in result.findings}["host-bound"].detail

    many = detail({"torch_threads": 16})
    assert "this process ran them on 16" in many and "the saving is an estimate" in many
    for notes in ({"torch_threads": 1}, {}):
        one = detail(notes)
        assert "ran them on" not in one and "an estimate" not in one
        assert "slower workers save less (" in one and "at 2.85x, the slowest pace seen on another host)." in one


def _with_upload(fault_ns: float | None, loading: str = LOADING) -> Trace:
    """:func:`loader_bound` (with ``loading``) whose forward starts with a blocking 1 ms pageable upload of 16 MiB
    (4,096 pages); ``fault_ns``: what the probe measured per page of shared memory (None: no such probe)."""
    extra = []
    for k in range(6):
        t = k * 8 * MS + 6 * MS
        extra += [
            iv(
                CPU,
                "sync_wait",
                t,
                t + MS,
                "aten::to",
                cause="blocking_copy",
                source="train.py:31",
                id=5000 + 2 * k,
                step=k,
            ),
            iv(
                COMPUTE,
                "memcpy_h2d",
                t,
                t + MS - 10 * US,
                "Memcpy HtoD (Pageable -> Device)",
                bytes=16 << 20,
                memory_kind="pageable",
                launch_id=5000 + 2 * k,
                id=5001 + 2 * k,
                step=k,
            ),
        ]
    t = loader_bound(loading=loading, extra=extra)
    probe = {**t.meta.bandwidth_probe, **({} if fault_ns is None else {"shm_fault_ns_per_4kib": fault_ns})}
    return t.with_meta(bandwidth_probe=probe)


def test_a_worker_s_batch_is_uploaded_at_the_cost_of_faulting_in_its_shared_pages() -> None:
    """With workers, each batch reaches the process in shared memory, and its pageable upload faults each page
    in: the DataLoader fix's saving is smaller by the upload's pages times what the probe measured a page (the
    copy holds the host), and the detail says so, probed or assumed; pinning is what takes it off the path."""

    def finding(fault_ns: float | None) -> Any:
        return {x.rule: x for x in analyze(_with_upload(fault_ns)).findings}["host-bound"]

    free, probed, assumed = finding(0), finding(500), finding(None)
    assert free.cost_per_step_ns - probed.cost_per_step_ns == pytest.approx(4096 * 500, abs=1 * US)
    assert free.cost_per_step_ns - assumed.cost_per_step_ns == pytest.approx(4096 * SHM_FAULT_NS_PER_4KIB, abs=1 * US)
    assert "2.05 ms more per step (0.50 us per 4 KiB, as probed on this host)" in probed.detail
    assert f"({SHM_FAULT_NS_PER_4KIB / 1e3:.2f} us per 4 KiB, as measured on another host)" in assumed.detail
    assert "pin_memory=True moves that read to the DataLoader's pinning thread" in probed.detail
    assert "shared memory" not in {x.rule: x for x in analyze(loader_bound()).findings}["host-bound"].detail


def test_batches_that_already_came_from_workers_pay_their_page_faults_once() -> None:
    """A loop that already has workers (its loading stacks wait in the DataLoader's ``_get_data``): its
    uploads already read shared pages in the recording, and more workers add no faults on top."""
    waiting = f"{LOADING};_get_data (torch/utils/data/dataloader.py:1295)"

    def finding(fault_ns: float) -> Any:
        return {x.rule: x for x in analyze(_with_upload(fault_ns, waiting)).findings}["host-bound"]

    free, probed = finding(0), finding(500)
    assert free.cost_per_step_ns == probed.cost_per_step_ns and "shared memory" not in probed.detail
    assert {x.rule: x for x in analyze(_with_upload(500)).findings}[
        "host-bound"
    ].cost_per_step_ns < free.cost_per_step_ns


def test_a_copy_already_replayed_pinned_pays_no_page_faults() -> None:
    """The what-if replays the pinning fix before the DataLoader's: an upload it already made a pinned copy is
    not lengthened by the faults (the DataLoader's pinning thread reads the pages)."""
    from webapp.analysis.causal import causal_model, fixes
    from webapp.analysis.context import prepare
    from webapp.analysis.rules.host_bound import _from_workers

    g = causal_model(prepare(_with_upload(500))).graph
    ups = np.flatnonzero(g.g_bytes > 0)
    change = _from_workers(np.zeros(g.n_host, dtype=np.int64), ups, g.g_dur[ups], np.full(len(ups), 2 * MS))
    assert (change(g).g_dur[ups] == g.g_dur[ups] + 2 * MS).all()
    pinned = fixes.pin_copies(g, ups, 53.7)
    assert (change(pinned).g_dur[ups] == pinned.g_dur[ups]).all() and (pinned.g_dur[ups] < g.g_dur[ups]).all()


@pytest.mark.parametrize(
    ("need", "cpus", "workers"),
    [(0.3, 16, 2), (2.0, 16, 2), (2.1, 16, 4), (6.0, 16, 8), (9.0, 16, 15), (6.0, 5, 4), (6.0, None, 8), (3, 1, 1)],
)
def test_the_workers_advised_cover_the_need_in_powers_of_two_within_the_cpus(
    need: float, cpus: int | None, workers: int
) -> None:
    from webapp.analysis.rules.host_bound import _workers

    assert _workers(need, cpus) == workers


def test_the_caller_named_is_the_one_behind_the_frame_s_time() -> None:
    """decode runs 2.0 ms per step under load_batch and 0.1 ms under augment (mostly other work): it is named
    in load_batch, never in augment."""
    from webapp.analysis import hoststacks
    from webapp.analysis.context import prepare

    segments = [
        (f"{LOOP};augment (aug.py:5);other_thing (aug.py:9)", 2.4),
        (f"{LOOP};augment (aug.py:5);decode (imagelib/core.py:7)", 0.1),
        (f"{LOOP};load_batch (data.py:40);decode (imagelib/core.py:7)", 2.0),
        (f"{LOOP};forward (model.py:12)", 3.5),
    ]
    rows = []
    for k in range(6):
        t = k * 8 * MS
        for name, ms in segments:
            rows.append(iv(SAMPLES, "sample", t, t + int(ms * MS), name, step=k))
            t += int(ms * MS)
        t = k * 8 * MS
        rows += [
            iv(CPU, "launch", t + 8 * MS - 10 * US, t + 8 * MS - 5 * US, id=1000 + 2 * k, step=k),
            iv(COMPUTE, "kernel", t + 8 * MS, t + 9 * MS, "gemm", launch_id=1000 + 2 * k, id=1001 + 2 * k, step=k),
        ]
    all_lanes = [*lanes(), Lane(0, LaneKind.CPU_THREAD, -100, "main thread: Python stack (sampled)")]
    trace = Trace.build(
        RunMeta(source="test"), all_lanes, rows, steps(*[(k * 8 * MS, (k + 1) * 8 * MS) for k in range(6)])
    )
    text = hoststacks.top_frames(prepare(trace))
    assert "decode (imagelib/core.py:7) in load_batch (data.py:40)" in text and "in augment" not in text


def test_the_frames_of_one_rank_are_that_ranks() -> None:
    """Rank 0 waits on its DataLoader, rank 1 logs: each rank's frames are its own, the run's are both."""
    from collector.ranks.merge import merge_traces
    from webapp.analysis import hoststacks
    from webapp.analysis.context import prepare

    logging = f"{LOOP};log_metrics (train.py:55)"
    rd = prepare(merge_traces([loader_bound(), loader_bound(loading=logging, rank=1)]))
    assert hoststacks.top_frames(rd, rank=0).startswith("_next_data (torch/utils/data/dataloader.py:757)")
    assert hoststacks.top_frames(rd, rank=1).startswith("log_metrics (train.py:55) 75%")
    both = hoststacks.frame_table(rd).set_index("frame")
    assert both.loc["log_metrics (train.py:55)", "total_frac"] == pytest.approx(0.375)
    one = hoststacks.frame_table(rd, rank=1).set_index("frame")
    assert one.loc["log_metrics (train.py:55)", "total_frac"] == pytest.approx(0.75)
    assert "forward (model.py:12)" in one.index and "_next_data (torch/utils/data/dataloader.py:757)" not in one.index
    by_rank = analyze(merge_traces([loader_bound(), loader_bound(loading=logging, rank=1)])).ranks["host_frames"]
    assert sorted(by_rank) == ["0", "1"] and by_rank["1"] == hoststacks.frame_table(rd, rank=1).to_dict("records")


def test_the_recorder_s_own_frames_count_to_the_user_s_line() -> None:
    """Ops run under the recorder's op naming (first step): the time is the user's line's, and no frame of the
    recorder reaches the table or the finding."""
    from webapp.analysis import hoststacks
    from webapp.analysis.context import prepare

    recorder = "__torch_dispatch__ (collector/recording/opnames.py:90);__call__ (torch/_ops.py:865)"
    named = f"{LOOP};prepare (train.py:22);{recorder}"
    rd = prepare(loader_bound(loading=named))
    table = hoststacks.frame_table(rd).set_index("frame")
    assert not any("collector/recording" in f or "torch/_ops.py" in f for f in table.index)
    assert table.loc["prepare (train.py:22)", "self_ns"] == 5 * 6 * MS
    assert hoststacks.top_frames(rd).startswith("prepare (train.py:22) 75%")
    alone = "probe (collector/recording/probe.py:3)"
    assert hoststacks.without_recorder(alone) == alone


def test_a_loop_whose_own_line_holds_the_time_is_named() -> None:
    """A loop of ops in C++ spends its time in its own line (no Python frame inside): that line is the answer,
    though it is around everything."""
    from webapp.analysis import hoststacks
    from webapp.analysis.context import prepare

    text = hoststacks.top_frames(prepare(loader_bound(loading=LOOP)))
    assert text == "train_epoch (train.py:30) 75%, forward (model.py:12) 25%"


def test_a_cpu_timed_recording_shows_host_time_by_op() -> None:
    """--timing cpu keeps every host op (and no Python stacks): host time by op stands in, as for a
    torch.profiler trace; with GPU timing the recorder names ops in its first step only, so it does not."""
    from webapp.analysis import hoststacks
    from webapp.analysis.context import prepare

    rows = []
    for k in range(4):
        t = k * 10 * MS
        rows += [
            iv(CPU, "cpu_op", t, t + 6 * MS, "aten::mm", step=k),
            iv(CPU, "cpu_op", t + 6 * MS, t + 9 * MS, "aten::add_", step=k),
        ]
    marks = steps(*[(k * 10 * MS, (k + 1) * 10 * MS) for k in range(4)])

    def run(timing: str) -> RunData:
        return prepare(Trace.build(RunMeta(source="streamscope", notes={"timing": timing}), lanes(), rows, marks))

    assert hoststacks.frames_basis(run("cupti")) == ""
    cpu = run("cpu")
    assert hoststacks.frames_basis(cpu) == "cpu_ops"
    assert hoststacks.frame_table(cpu).set_index("frame").loc["aten::mm", "self_ns"] == 4 * 6 * MS


def test_a_replayed_fix_that_slows_the_steps_says_so() -> None:
    from webapp.analysis.rules.host_bound import _saves

    assert _saves("CUDA graphs", 2_500_000) == "CUDA graphs saves 2.50 ms"
    assert _saves("CUDA graphs", -40_000) == "CUDA graphs would add 0.04 ms"


def test_a_collection_in_the_loop_is_named_where_the_host_time_goes() -> None:
    """The sampled loading stretches are a full collection triggered in the user's load_batch: the frame table
    gives the collection the time, under the stack sampled before it."""
    stack = f"{LOOP};load_batch (data.py:40);{label(2)}"
    result = analyze(loader_bound(loading=stack))
    table = result.host_frames.set_index("frame")
    assert table.loc[label(2), "self_ns"] > 0
    f = {x.rule: x for x in (*result.findings, *result.minor_findings)}["host-bound"]
    assert f"{label(2)} in load_batch (data.py:40)" in f.detail, f.detail


def _with_waits(*waits: tuple[int, int, str], loading: str = LOADING) -> Trace:
    """:func:`loader_bound` with a sync wait on the main thread's lane in each step: (start after the step's
    start, ns; duration, ns; source ``path:line``)."""
    rows = [
        iv(CPU, "sync_wait", k * 8 * MS + at, k * 8 * MS + at + dur, "cudaStreamSynchronize", source=src, step=k)
        for k in range(6)
        for at, dur, src in waits
    ]
    return loader_bound(loading=loading, extra=rows)


def test_a_wait_inside_a_sampled_stretch_counts_to_the_line_that_waited() -> None:
    """Each step's forward stretch (2 ms, sampled in model.py) holds a 1 ms wait at train.py:33, recorded with
    its line: that millisecond goes to train_epoch at line 33, not to forward. A wait in a file that is not on
    the stretch's stack stays with the stretch (where it was called from is not known)."""
    t = _with_waits((6 * MS + 500 * US, MS, "/home/me/train.py:33"), (MS, MS // 2, "/lib/other.py:5"))
    table = analyze(t).host_frames.set_index("frame")
    # the samples of steps 1-5 fall in the step windows (the first test)
    assert table.loc["train_epoch (train.py:33)", "self_ns"] == 5 * MS
    assert table.loc["forward (model.py:12)", "self_ns"] == 5 * MS
    assert table.loc["_next_data (torch/utils/data/dataloader.py:757)", "self_ns"] == 5 * 6 * MS
    assert table.loc["train_epoch (train.py:30)", "total_frac"] == pytest.approx(7 / 8)  # loading and forward
    assert table["self_ns"].sum() == 5 * 8 * MS  # moved, not added


def test_a_wait_at_a_line_sampled_in_another_function_stays_with_its_stretch() -> None:
    """train.py:33 is sampled in log_step (the loading stretches here), so a wait there inside the forward
    stretch is not train_epoch's line 33: not moved. A torch.profiler trace's Python calls are exact, so its
    waits are never moved."""
    wait = (6 * MS + 500 * US, MS, "/home/me/train.py:33")
    table = analyze(_with_waits(wait, loading=f"{LOOP};log_step (train.py:33)")).host_frames.set_index("frame")
    assert "train_epoch (train.py:33)" not in table.index
    assert table.loc["forward (model.py:12)", "self_ns"] == 5 * 2 * MS
    profiler = analyze(_with_waits(wait).with_meta(source="torch.profiler"))
    assert "train_epoch (train.py:33)" not in profiler.host_frames["frame"].tolist()
    assert "train_epoch (train.py:33)" in analyze(_with_waits(wait)).host_frames["frame"].tolist()
