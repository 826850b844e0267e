"""The what-if: every listed finding's fix replayed together; each saving is its finding's own."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_traces import MS, US, clean_run, pageable_run

from collector.synthetic import synthetic_trace
from webapp.analysis import analyze


def test_pageable_serial_copy_fixed_is_the_compute_time() -> None:
    w = analyze(pageable_run(3)).what_if
    assert w["step_time_now_ns"] == 28 * MS
    # pinned and prefetched a step ahead, the copies hide behind the 15.98 ms kernels: each step is its
    # kernel plus the 20 us launch gap of the first step, 16 ms
    assert w["step_time_fixed_ns"] == 16 * MS
    assert w["speedup"] == pytest.approx(28 / 16)
    result = analyze(pageable_run(3))
    assert {k for k in w if k.startswith("saving_") and k != "saving_applied_ns"} == {
        f"saving_{f.rule.replace('-', '_')}_ns" for f in result.findings
    }
    for f in result.findings:
        assert w[f"saving_{f.rule.replace('-', '_')}_ns"] == f.cost_per_step_ns
    # pinning alone: the copy shrinks to 1.25 ms and the host no longer waits for it
    assert w["saving_pageable_copy_ns"] == pytest.approx(12 * MS + 20 * US - np.ceil((64 << 20) / 53.7), abs=2 * US)
    # prefetching (pinned, a step ahead, on its own stream) hides the copy from the second step on
    assert w["saving_no_copy_overlap_ns"] > w["saving_pageable_copy_ns"]


def test_clean_run_estimate_is_its_step_time() -> None:
    w = analyze(clean_run(2)).what_if
    assert w["step_time_fixed_ns"] == w["step_time_now_ns"] == 16 * MS


def test_naive_estimate_lands_near_the_overlap_run() -> None:
    naive = analyze(synthetic_trace(20_000, pattern="naive", steps=6, seed=1))
    overlap = analyze(synthetic_trace(20_000, pattern="overlap", steps=6, seed=1))
    est, measured = naive.what_if["step_time_fixed_ns"], overlap.metrics["step_time_median_ns"]
    assert abs(est - measured) / measured < 0.10
    assert naive.per_step["step_time_fixed_ns"].le(naive.per_step["step_time_ns"]).all()
