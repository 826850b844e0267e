"""Metrics on hand-built traces whose right answers are known exactly."""

from __future__ import annotations

import math

import pytest
from analysis_traces import COMPUTE, CPU, MS, TRANSFER, US, iv, steps, trace

from webapp.analysis import analyze


def _one_step():
    """Step [0, 1 ms): kernels [100, 400) and [500, 800) us, a copy [300, 600) us on the transfer stream,
    the first kernel launched during [0, 90) us, an item() sync over [800, 950) us."""
    return trace(
        [
            iv(CPU, "launch", 0, 90 * US, "cudaLaunchKernel", id=0),
            iv(CPU, "launch", 90 * US, 95 * US, "cudaLaunchKernel", id=1),
            iv(COMPUTE, "kernel", 100 * US, 400 * US, "k1", launch_id=0, id=2),
            iv(COMPUTE, "kernel", 500 * US, 800 * US, "k2", launch_id=1, id=3),
            iv(
                TRANSFER,
                "memcpy_h2d",
                300 * US,
                600 * US,
                "copy",
                bytes=3 << 20,
                memory_kind="pinned",
                non_blocking=True,
                id=4,
            ),
            iv(CPU, "sync_wait", 800 * US, 950 * US, "cudaStreamSynchronize", cause="item", source="t.py:3", id=5),
        ],
        steps((0, 1000 * US)),
    )


def test_busy_overlap_and_exposed_copy_are_exact() -> None:
    row = analyze(_one_step()).per_step.iloc[0]
    assert row["step_time_ns"] == 1000 * US
    assert row["gpu_busy_ns"] == 700 * US
    assert row["compute_busy_ns"] == 600 * US
    assert row["transfer_busy_ns"] == 300 * US
    assert row["copy_compute_overlap_ns"] == 200 * US
    assert row["exposed_copy_ns"] == 100 * US
    assert row["copy_compute_overlap_frac"] == pytest.approx(2 / 3)


def test_critical_path_splits_the_step_by_what_it_waited_on() -> None:
    row = analyze(_one_step()).per_step.iloc[0]
    assert row["gpu_idle_ns"] == 300 * US
    # back from the step's end: 50 us after the wait (nothing known), the wait's 150 us wake-up after k2,
    # k2 (300 us) queued behind k1 (300 us) with a 100 us gap nothing explains (other), k1 10 us after its
    # launch returned, the 90 us call
    assert row["cp_other_ns"] == 150 * US and row["cp_sync_ns"] == 150 * US
    assert row["cp_compute_ns"] == 600 * US and row["cp_launch_ns"] == 10 * US
    assert row["cp_host_ns"] == 90 * US and row["cp_copy_ns"] == 0
    assert row["sync_wait_count"] == 1 and row["sync_wait_ns"] == 150 * US


def test_a_wait_that_outlasts_its_step_counts_only_to_the_steps_end() -> None:
    """A final synchronize issued 0.9 ms into a 1 ms step waits 5 ms for work queued later: 0.1 ms in the step."""
    t = trace(
        [
            iv(CPU, "launch", 0, 10 * US, "cudaLaunchKernel", id=0),
            iv(COMPUTE, "kernel", 20 * US, 900 * US, "k", launch_id=0, id=1),
            iv(CPU, "sync_wait", 900 * US, 5900 * US, "cudaDeviceSynchronize", cause="synchronize", id=2),
            iv(CPU, "launch", 1000 * US, 1010 * US, "cudaLaunchKernel", id=3),
            iv(COMPUTE, "kernel", 1020 * US, 5890 * US, "k", launch_id=3, id=4),
        ],
        steps((0, 1000 * US), (1000 * US, 6000 * US)),
    )
    per = analyze(t).per_step
    assert per["sync_wait_ns"].tolist() == [100 * US, 4900 * US]
    assert (per["sync_wait_ns"] <= per["step_time_ns"]).all()


def test_host_work_between_launches_is_host_on_the_critical_path() -> None:
    # k2 is launched at 600 us, after 590 us of host work: the GPU waits for the host
    t = trace(
        [
            iv(CPU, "launch", 0, 5 * US, id=0),
            iv(COMPUTE, "kernel", 10 * US, 400 * US, "k1", launch_id=0, id=2),
            iv(CPU, "launch", 600 * US, 605 * US, id=1),
            iv(COMPUTE, "kernel", 610 * US, 900 * US, "k2", launch_id=1, id=3),
        ],
        steps((10 * US, 900 * US)),
    )
    row = analyze(t).per_step.iloc[0]
    # k2 (290 us), 5 us after its launch returned, the 5 us call, 590 us of host work before it
    assert row["cp_compute_ns"] == 290 * US and row["cp_launch_ns"] == 5 * US
    assert row["cp_host_ns"] == 595 * US


def test_run_level_metrics_medians_and_bandwidth() -> None:
    result = analyze(_one_step())
    m = result.metrics
    assert m["steps"] == 1 and m["ranks"] == 1
    assert m["step_time_median_ns"] == 1000 * US
    assert m["gpu_busy_frac"] == pytest.approx(0.7)
    assert m["h2d_pinned_achieved_gbps"] == pytest.approx((3 << 20) / (300 * US))
    assert m["h2d_pinned_probe_gbps"] == 53.7
    assert math.isnan(m["h2d_pageable_achieved_gbps"])
    assert result.per_rank.loc[0, "gpu_busy_ns"] == 700 * US
    k = result.kernels.set_index("name")
    assert k.loc["k1", "count"] == 1 and k.loc["k1", "total_ns"] == 300 * US
    assert k.loc["k1", "gpu_frac"] == pytest.approx(300 / 700)
    s = result.sync_sources.iloc[0]
    assert (s["cause"], s["source"], s["count"], s["total_ns"]) == ("item", "t.py:3", 1, 150 * US)
    assert s["saving_ns"] == 150 * US  # without the wait the step ends when the host would have gone on


def test_without_markers_the_run_is_one_step() -> None:
    t = trace([iv(COMPUTE, "kernel", 2 * MS, 3 * MS, id=0), iv(COMPUTE, "kernel", 4 * MS, 6 * MS, id=1)])
    ps = analyze(t).per_step
    assert len(ps) == 1 and ps.loc[0, "step_time_ns"] == 4 * MS and ps.loc[0, "gpu_busy_ns"] == 3 * MS


def test_per_rank_and_per_step_over_two_ranks() -> None:
    rows = [iv(1, "kernel", 0, 10 * MS, id=0), iv(4, "kernel", 0, 5 * MS, id=1)]
    markers = steps((0, 10 * MS)) + steps((0, 10 * MS), rank=1)
    result = analyze(trace(rows, markers, ranks=2))
    assert result.per_rank["gpu_busy_ns"].tolist() == [10 * MS, 5 * MS]
    assert result.metrics["gpu_busy_frac"] == pytest.approx(0.75)
    assert len(result.per_step) == 2


def test_step_windows_follow_gpu_work_when_host_runs_ahead() -> None:
    # host marks three 1 ms steps, the GPU work launched in them takes 10 ms each
    rows = []
    for k in range(3):
        rows += [
            iv(CPU, "launch", k * MS, k * MS + 5 * US, id=2 * k, step=k),
            iv(COMPUTE, "kernel", 10 * US + k * 10 * MS, (k + 1) * 10 * MS, launch_id=2 * k, id=2 * k + 1, step=k),
        ]
    result = analyze(trace(rows, steps((0, MS), (MS, 2 * MS), (2 * MS, 3 * MS))))
    assert result.per_step["step_time_ns"].tolist() == [10 * MS, 10 * MS, 10 * MS - 10 * US]
    assert result.metrics["step_time_median_ns"] == 10 * MS


def test_empty_trace_does_not_fail() -> None:
    result = analyze(trace([]))
    assert result.summary()["steps"] == 0 and result.findings == ()
    assert result.to_dict()["what_if"]["step_time_now_ns"] is None


def test_step_annotations_stand_in_for_missing_markers() -> None:
    # record_function("step N") on the host, no markers; the host runs ahead, the GPU takes 10 ms a step
    rows = [iv(CPU, "cpu_op", 0, 10 * US, "setup", id=99)]
    for k in range(3):
        rows += [
            iv(CPU, "annotation", 100 * US + k * MS, 100 * US + (k + 1) * MS - 10 * US, f"step {k}", id=3 * k),
            iv(CPU, "launch", 200 * US + k * MS, 205 * US + k * MS, id=3 * k + 1),
            iv(COMPUTE, "kernel", 5 * MS + k * 10 * MS, 15 * MS + k * 10 * MS, launch_id=3 * k + 1, id=3 * k + 2),
        ]
    result = analyze(trace(rows))
    assert result.per_step["step"].tolist() == [0, 1, 2]
    assert result.per_step["step_time_ns"].tolist() == [10 * MS] * 3
    assert "annotations" in result.notes[0]


def test_run_without_steps_spans_its_gpu_work() -> None:
    rows = [iv(CPU, "cpu_op", 0, 1 * MS, id=0), iv(COMPUTE, "kernel", 3 * MS, 5 * MS, id=1)]
    assert analyze(trace(rows)).per_step["step_time_ns"].tolist() == [2 * MS]


def test_the_page_note_names_the_timing_source_and_how_cupti_was_read() -> None:
    from webapp.analysis.run import timing_note

    base = trace([iv(COMPUTE, "kernel", 0, MS)])
    assert timing_note(base.with_meta(notes={})) == ()
    client = timing_note(base.with_meta(notes={"timing": "cupti", "cupti_reader": "client", "timing_note": "exact"}))
    assert client == ("GPU timing: cupti, read from libcupti by the recorder (exact).",)
    kineto = timing_note(base.with_meta(notes={"timing": "cupti", "cupti_reader": "kineto"}))
    assert kineto == ("GPU timing: cupti, read through torch.profiler (Kineto).",)
    assert timing_note(base.with_meta(notes={"timing": "events"})) == ("GPU timing: events.",)


def test_a_rank_s_only_step_keeps_its_host_time_before_its_gpu_work() -> None:
    """One profiled step: 2.8 ms of host work, then a 90 us kernel. The step is the 3 ms, not the kernel's."""
    t = trace(
        [
            iv(CPU, "cpu_op", 0, 2_800 * US, "data prep", id=0),
            iv(CPU, "launch", 2_800 * US, 2_805 * US, "cudaLaunchKernel", id=1),
            iv(COMPUTE, "kernel", 2_810 * US, 2_900 * US, "k", launch_id=1, id=2),
        ],
        steps((0, 3_000 * US)),
    )
    row = analyze(t).per_step.iloc[0]
    assert row["step_time_ns"] == 3_000 * US
    assert row["cp_host_ns"] >= 2_800 * US
