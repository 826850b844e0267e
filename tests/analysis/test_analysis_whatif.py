"""The what-if estimate: fixed copies and syncs, bounded by compute and pinned copy time."""

from __future__ import annotations

import pytest
from analysis_traces import MS, clean_run, pageable_run

from collector.synthetic import synthetic_trace
from webapp.analysis import analyze


def test_pageable_serial_copy_fixed_is_the_compute_time() -> None:
    w = analyze(pageable_run(3)).what_if
    assert w["step_time_now_ns"] == 28 * MS
    # 28 ms - 10.75 (pinned) - 1.25 (overlapped) = 16 ms; the 20 us blocking gap is a minor finding, which the
    # what-if leaves out (every saving it applies is a listed finding)
    assert w["step_time_fixed_ns"] == 16 * MS
    assert "saving_blocking_copy_ns" not in w
    assert w["saving_no_copy_overlap_ns"] == pytest.approx((64 << 20) / 53.7, abs=1)
    assert w["speedup"] == pytest.approx(28 / 16)
    assert w["saving_pageable_copy_ns"] > 10 * MS


def test_clean_run_estimate_is_its_step_time() -> None:
    w = analyze(clean_run(2)).what_if
    assert w["step_time_fixed_ns"] == w["step_time_now_ns"] == 16 * MS


def test_naive_estimate_lands_near_the_overlap_run() -> None:
    naive = analyze(synthetic_trace(20_000, pattern="naive", steps=6, seed=1))
    overlap = analyze(synthetic_trace(20_000, pattern="overlap", steps=6, seed=1))
    est, measured = naive.what_if["step_time_fixed_ns"], overlap.metrics["step_time_median_ns"]
    assert abs(est - measured) / measured < 0.10
    assert naive.per_step["step_time_fixed_ns"].le(naive.per_step["step_time_ns"]).all()
