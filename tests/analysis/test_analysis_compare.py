"""compare() on two known runs: metrics, ops, findings and step-aligned views."""

from __future__ import annotations

import json

import numpy as np
import pytest
from analysis_traces import MS, clean_run, pageable_run

from webapp.analysis.catalog import direction
from webapp.analysis.compare import compare


@pytest.fixture(scope="module")
def cmp():
    return compare(pageable_run(2), clean_run(2))


def test_metrics_side_by_side(cmp) -> None:
    m = cmp.metrics.set_index("metric")
    row = m.loc["step_time_median_ns"]
    assert (row["a"], row["b"], row["delta"]) == (28 * MS, 16 * MS, -12 * MS)
    assert row["rel_change"] == pytest.approx(-12 / 28)
    assert row["better"] is True
    assert m.loc["copy_compute_overlap_frac", "better"] is True  # 0 -> 1
    assert m.loc["ranks", "better"] is None
    assert cmp.step_time_change == pytest.approx(-12 / 28)


def test_ops_added_removed_faster_slower(cmp) -> None:
    ops = cmp.ops.set_index("name")
    assert ops.loc["Memcpy HtoD (Pageable -> Device)", "status"] == "removed"
    assert ops.loc["Memcpy HtoD (Pinned -> Device)", "status"] == "added"
    gemm = ops.loc["gemm"]
    assert (gemm["a_count"], gemm["b_count"]) == (2, 2)
    assert gemm["status"] == "same"  # 15.98 ms vs 16 ms: within 5%
    assert gemm["delta_ns"] == 2 * 20_000
    by_kind = cmp.ops.set_index(["kind", "name"])["status"]
    assert by_kind[("sync_wait", "aten::to")] == "removed" and by_kind[("cpu_op", "aten::to")] == "added"


def test_findings_fixed_new_unchanged(cmp) -> None:
    assert set(cmp.findings["fixed"]) >= {"pageable-copy", "no-copy-overlap"}
    assert cmp.findings["new"] == [] and cmp.findings["unchanged"] == []
    back = compare(clean_run(2), pageable_run(2))
    assert "pageable-copy" in back.findings["new"] and back.step_time_change == pytest.approx(12 / 16)


def test_step_aligned_times_are_relative_to_each_step(cmp) -> None:
    a, b = cmp.step_aligned(1, 1)
    assert a["rel_start_ns"].min() == 0 and b["rel_start_ns"].min() == 0
    assert sorted(a["kind"].astype(str)) == ["kernel", "launch", "memcpy_h2d", "sync_wait"]
    assert a.loc[a["kind"] == "kernel", "rel_end_ns"].item() == 28 * MS
    with pytest.raises(ValueError, match="step 5 of rank 0"):
        cmp.step_aligned(5, 0)


def test_to_dict_is_json(cmp) -> None:
    d = json.loads(json.dumps(cmp.to_dict(), allow_nan=False))
    assert d["findings"]["fixed"] and d["a"]["summary"]["findings"] >= 1


def test_metric_directions() -> None:
    assert direction("step_time_p90_ns") == -1 and direction("gpu_busy_frac") == 1
    assert direction("intervals") == 0


def test_ops_per_step_when_step_counts_differ() -> None:
    import pandas as pd

    from webapp.analysis.compare import ops_table

    a = pd.DataFrame({"kind": ["kernel"], "name": ["mm"], "count": [100], "total_ns": [100 * MS], "mean_ns": [MS]})
    b = pd.DataFrame({"kind": ["kernel"], "name": ["mm"], "count": [150], "total_ns": [150 * MS], "mean_ns": [MS]})
    row = ops_table(a, b, a_steps=100, b_steps=150).iloc[0]
    assert row["delta_ns"] == 50 * MS  # more steps, more total time...
    assert row["a_step_ns"] == row["b_step_ns"] == MS  # ...but the same time per step
    assert row["delta_step_ns"] == 0
    assert row["status"] == "same"


def test_an_ops_status_is_the_sign_of_the_per_step_change_shown_beside_it() -> None:
    """Each call got faster but there are twice as many per step: the op costs the step more, so "slower"."""
    import pandas as pd

    from webapp.analysis.compare import ops_table

    a = pd.DataFrame({"kind": ["kernel"], "name": ["mm"], "count": [100], "total_ns": [100 * MS], "mean_ns": [MS]})
    b = pd.DataFrame(
        {"kind": ["kernel"], "name": ["mm"], "count": [200], "total_ns": [160 * MS], "mean_ns": [0.8 * MS]}
    )
    row = ops_table(a, b, a_steps=100, b_steps=100).iloc[0]
    assert row["b_mean_ns"] < row["a_mean_ns"] and row["delta_step_ns"] == 0.6 * MS
    assert row["status"] == "slower"
    row = ops_table(b, a, a_steps=100, b_steps=100).iloc[0]
    assert row["delta_step_ns"] < 0 and row["status"] == "faster"


def _cpu_run():
    """Four steps of host ops and nothing on a GPU (a CPU rank)."""
    from collector.model import Interval, IntervalKind, Lane, LaneKind, Marker, MarkerKind, RunMeta, Trace

    rows, marks = [], []
    for k in range(4):
        t = (1 + 10 * k) * MS
        rows.append(Interval(0, IntervalKind.CPU_OP, "aten::mm", t, t + 6 * MS, step=k))
        marks.append(Marker(0, MarkerKind.STEP, f"step {k}", t, t + 10 * MS, k))
    return Trace.build(RunMeta.new(source="synthetic"), [Lane(0, LaneKind.CPU_THREAD, 1, "main thread")], rows, marks)


def test_a_run_without_gpu_work_has_no_gpu_figures_beside_a_gpu_run() -> None:
    from webapp.analysis.report import comparison_text

    c = compare(_cpu_run(), clean_run(2))
    m = c.metrics.set_index("metric")
    for key in ("gpu_busy_frac", "gpu_idle_step_median_ns", "compute_busy_step_median_ns"):
        assert np.isnan(m.loc[key, "a"]) and not np.isnan(m.loc[key, "b"]), key
        assert m.loc[key, "better"] is None, key
    assert m.loc["host_busy_step_median_ns", "a"] == pytest.approx(6 * MS)
    rows = {line[:28].strip(): line for line in comparison_text(c).splitlines()}
    assert "Host busy / step" in rows and "GPU idle / step" in rows
    idle = rows["GPU idle / step"]
    assert idle[28:45].strip() == "-" and not idle.endswith(("better", "worse"))  # A has no GPU: no figure
