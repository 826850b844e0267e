"""compare() on two known runs: metrics, ops, findings and step-aligned views."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from analysis_traces import MS, clean_run, pageable_run
from compare_traces import LISTED_COPY_NS, MINOR_COPY_NS, copy_run

from webapp.analysis.catalog import direction
from webapp.analysis.compare import change_text, compare, compare_analyses


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
    a_column = idle[len("GPU idle / step") :].split()[0]
    assert a_column == "-" and not idle.endswith(("better", "worse"))  # A has no GPU: no figure


# ---- findings below the listing threshold, changes within noise, runs of different step counts, the verdict ----


def test_a_finding_that_drops_below_the_threshold_is_still_there_not_fixed() -> None:
    from webapp.analysis.report import comparison_text
    from webapp.analysis.run import analyze

    ra, rb = analyze(copy_run(LISTED_COPY_NS)), analyze(copy_run(MINOR_COPY_NS))
    assert "pageable-copy" in {f.rule for f in ra.findings}
    minor = {f.rule: f for f in rb.minor_findings}
    assert "pageable-copy" in minor and "pageable-copy" not in {f.rule for f in rb.findings}
    c = compare_analyses(ra, rb)
    assert "pageable-copy" not in c.findings["fixed"]
    assert set(c.findings["minor"]) == {"pageable-copy", "no-copy-overlap"} and c.findings["fixed"] == []
    assert c.finding_costs["pageable-copy"] == minor["pageable-copy"].cost_per_step_ns > 0
    text = comparison_text(c)
    assert "findings fixed: -" in text
    cost = minor["pageable-copy"].cost_per_step_ns / 1e6
    assert "findings below the threshold now (minor in B): no-copy-overlap" in text
    assert f"pageable-copy ({cost:.3f} ms/step)" in text
    # the other way round the finding grows above the threshold: it was there in A, so it is not "new"
    back = compare_analyses(rb, ra)
    assert back.findings["new"] == [] and set(back.findings["grown"]) == {"pageable-copy", "no-copy-overlap"}
    assert json.loads(json.dumps(c.to_dict()))["findings"]["minor"] == c.findings["minor"]


def test_a_finding_gone_from_both_lists_of_b_is_fixed(cmp) -> None:
    assert set(cmp.findings["fixed"]) >= {"pageable-copy", "no-copy-overlap"}
    assert cmp.findings["minor"] == cmp.findings["grown"] == []


def test_a_change_that_shows_as_zero_or_within_noise_reads_same() -> None:
    from webapp.analysis.compare import metrics_table
    from webapp.figures import compare_rows

    a = {
        "gpu_busy_frac": 0.5,
        "step_time_median_ns": 10 * MS,
        "step_time_p90_ns": 10 * MS,
        "exposed_copy_ns": 0,
        "gpu_idle_ns": 0,
    }
    b = {
        "gpu_busy_frac": 0.5004,  # +0.04 pts: shows as +0.0 pts
        "step_time_median_ns": 10 * MS + 40_000,  # +0.4%: under 0.5%, run-to-run noise
        "step_time_p90_ns": 10 * MS + 60_000,  # +0.6%: a real change
        "exposed_copy_ns": 3_000,  # A is 0: B - A is shown, and it is not 0 (0.003 ms)
        "gpu_idle_ns": 400,  # shows as 400 ns against 0 ns: a change, however small
    }
    t = metrics_table(a, b).set_index("metric")
    assert t.loc["gpu_busy_frac", "better"] is None and t.loc["step_time_median_ns", "better"] is None
    assert t.loc["gpu_busy_frac", "change"] == 0.0 and t.loc["gpu_busy_frac", "status"] == "same"
    assert t.loc["step_time_median_ns", "change"] == 0.4 and t.loc["step_time_median_ns", "status"] == "same"
    assert t.loc["step_time_p90_ns", "change"] == 0.6 and t.loc["step_time_p90_ns", "status"] == "worse"
    assert t.loc["exposed_copy_ns", "status"] == "worse" and np.isnan(t.loc["exposed_copy_ns", "change"])
    assert t.loc["gpu_idle_ns", "status"] == "worse" and np.isnan(t.loc["gpu_idle_ns", "change"])
    # two times that show alike read the same, whatever the ratio; one that drops to 0 ns is -100%, not +0.0%
    t = metrics_table({"gpu_idle_ns": 447.2, "exposed_copy_ns": 447}, {"gpu_idle_ns": 447.4, "exposed_copy_ns": 0})
    assert t["status"].tolist() == ["same", "better"] and t["change"].tolist() == [0.0, -100.0]
    rows = {r["metric"]: r for r in compare_rows(json.loads(json.dumps(metrics_table(a, b).to_dict("records"))))}
    assert (rows["gpu_busy_frac"]["change"], rows["gpu_busy_frac"]["cls"]) == ("+0.0 pts", "same")
    assert (rows["step_time_median_ns"]["change"], rows["step_time_median_ns"]["cls"]) == ("+0.4%", "same")
    assert (rows["step_time_p90_ns"]["change"], rows["step_time_p90_ns"]["cls"]) == ("+0.6%", "worse")
    # the label follows the number shown: two changes that both show as +0.5% read alike
    a = {"step_time_median_ns": 1e9, "step_time_p90_ns": 1e9, "exposed_copy_ns": 0}
    b = {"step_time_median_ns": 1.00496e9, "step_time_p90_ns": 1.00504e9, "exposed_copy_ns": 0.3}  # 0.3: "0 ns"
    t = metrics_table(a, b)
    assert t["change"].tolist()[:2] == [0.5, 0.5] and t["status"].tolist() == ["worse", "worse", "same"]
    # a tiny drop shows as +0.0, not -0.0, and reads the same
    t = metrics_table({"gpu_busy_frac": 0.5}, {"gpu_busy_frac": 0.4999}).iloc[0]
    assert t["change"] == 0.0 and str(t["change"]) == "0.0" and t["status"] == "same"


@pytest.mark.parametrize(
    ("change", "frac", "text"),
    [
        (-52.7, False, "-52.7%"),
        (899.9, False, "+899.9%"),
        (900.0, False, "10x"),
        (102000.0, False, "1,021x"),
        (102000.0, True, "+102000.0 pts"),
        (float("nan"), False, "—"),
        (None, True, "—"),
    ],
)
def test_a_change_reads_in_percent_points_or_as_a_ratio_once_b_is_ten_times_a(
    change: float | None, frac: bool, text: str
) -> None:
    assert change_text(change, frac) == text


def test_the_text_comparison_marks_a_change_by_the_number_it_shows() -> None:
    from webapp.analysis.report import comparison_text
    from webapp.analysis.run import analyze

    ra = analyze(clean_run(2))
    metrics = {**ra.metrics, "gpu_busy_frac": ra.metrics["gpu_busy_frac"] + 0.0003}
    metrics["step_time_median_ns"] = ra.metrics["step_time_median_ns"] * 1.0004
    rb = dataclasses.replace(ra, metrics=metrics)
    rows = {line[:28].strip(): line for line in comparison_text(compare_analyses(ra, rb)).splitlines()}
    assert rows["GPU busy"].endswith("+0.0 pts same"), rows["GPU busy"]
    assert rows["Median step"].endswith("+0.0% same"), rows["Median step"]


@pytest.mark.parametrize(
    "change, text",
    [
        (0.0004, "B's median step takes as long as A's"),
        (-0.0004, "B's median step takes as long as A's"),
        (0.004, "B's median step takes about as long as A's (0.4% more: within run-to-run noise)"),
        (-0.003, "B's median step takes about as long as A's (0.3% less: within run-to-run noise)"),
        (0.006, "B's median step takes 0.6% more time than A's (1.01x slower)"),
    ],
)
def test_the_verdict_says_the_same_time_for_a_change_that_shows_as_none(change: float, text: str) -> None:
    from webapp.report import Verdict

    assert Verdict(change, None).text == text


def test_a_verdict_over_a_tight_bound_states_the_change_it_failed_on() -> None:
    from webapp.report import Verdict

    assert Verdict(0.003, 0.0).text == "FAIL: B's median step takes 0.30% more time than A's; the bound is 0.0% more"
    assert Verdict(0.003, 0.05).text.startswith("OK: B's median step takes about as long as A's")


def test_run_totals_are_compared_per_step_when_the_step_counts_differ() -> None:
    from webapp.analysis.report import comparison_text
    from webapp.figures import compare_metric_rows

    c = compare(pageable_run(4), pageable_run(2))  # the same steps, twice as many in A
    m = c.metrics.set_index("metric")
    for key in ("sync_wait_ns", "sync_wait_count", "step_time_ns", "pageable_copy_bytes", "exposed_copy_ns"):
        assert m.loc[key, "a"] == pytest.approx(m.loc[key, "b"]), key  # A's total / 4 == B's total / 2
        assert m.loc[key, "basis"] == "per_step", key
        assert m.loc[key, "status"] == "same" and m.loc[key, "better"] is None, key
    assert m.loc["sync_wait_count", "a"] == 1.0 and m.loc["step_time_ns", "a"] == 28 * MS
    assert m.loc["step_time_median_ns", "basis"] == "" and m.loc["steps", "a"] == 4  # not a total: as it is
    assert any("A has 4 steps and B 2" in n for n in c.notes)
    headline, others = compare_metric_rows(c.to_dict()["metrics"], c.analysis_a.metrics, c.analysis_b.metrics)
    labels = {r["metric"]: r["label"] for r in headline + others}
    assert labels["sync_wait_count"] == "Sync waits, mean per step"
    assert labels["sync_wait_ns"] == "Sync wait, mean per step" and labels["step_time_median_ns"] == "Median step"
    text = comparison_text(c)
    assert re.search(r"^Sync waits, mean per step +1\.00 +1\.00 +\+0\.0% same$", text, re.MULTILINE), text
    # the same step counts: the totals as they are, named as totals
    same = compare(pageable_run(2), clean_run(2))
    m = same.metrics.set_index("metric")
    assert m.loc["sync_wait_ns", "basis"] == "total" and m.loc["sync_wait_ns", "a"] == 2 * (12 * MS + 10_000)
    assert not any("steps and B" in n for n in same.notes)
    _, others = compare_metric_rows(same.to_dict()["metrics"], same.analysis_a.metrics, same.analysis_b.metrics)
    assert {r["metric"]: r["label"] for r in others}["sync_wait_ns"] == "Sync wait, total over the steps"


def test_run_totals_of_ranks_are_compared_per_rank_step() -> None:
    """Two 2-rank runs of 8 and 10 steps: a run total counts every rank's steps, so "mean per step" is the
    total over the (rank, step) rows, the mean step itself, not twice it."""
    from collector.ranks.merge import merge_traces
    from collector.steps import find_steps
    from collector.synthetic.ranks import rank_job

    a = find_steps(merge_traces(rank_job(2, 1500, steps=8, seed=5)))
    b = find_steps(merge_traces(rank_job(2, 1500, steps=10, seed=5)))
    c = compare(a, b)
    row = c.metrics.set_index("metric").loc["step_time_ns"]
    assert row["basis"] == "per_step"
    assert row["a"] == pytest.approx(c.analysis_a.per_step["step_time_ns"].mean())
    assert row["b"] == pytest.approx(c.analysis_b.per_step["step_time_ns"].mean())


def test_a_run_without_gpu_work_fixes_no_gpu_finding() -> None:
    """Against a run with no GPU work at all, A's GPU findings are not compared: neither fixed nor new, and a
    note says why."""
    from analysis_traces import CPU, iv, steps, trace

    rows = [iv(CPU, "cpu_op", k * 10 * MS, k * 10 * MS + 6 * MS, "aten::mm", step=k) for k in range(2)]
    cpu = trace(rows, steps((0, 10 * MS), (10 * MS, 20 * MS)))
    for a, b in ((pageable_run(2), cpu), (cpu, pageable_run(2))):
        c = compare(a, b)
        assert c.findings["fixed"] == [] and c.findings["new"] == []
        assert {"pageable-copy", "no-copy-overlap"} <= set(c.findings["unseen"])
        assert any("has GPU work and" in n and "neither fixed nor new" in n for n in c.notes)
    assert compare(pageable_run(2), clean_run(2)).findings["unseen"] == []


def test_a_finding_in_both_runs_shows_its_cost_in_each() -> None:
    from webapp.analysis.report import comparison_text

    c = compare(pageable_run(2), pageable_run(3))
    cost_a = {f.rule: f.cost_per_step_ns for f in c.analysis_a.findings}["pageable-copy"]
    cost_b = c.finding_costs["pageable-copy"]
    line = next(x for x in comparison_text(c).splitlines() if x.startswith("findings in both: "))
    assert f"pageable-copy ({cost_a / 1e6:.3f} ms -> {cost_b / 1e6:.3f} ms/step)" in line


def test_a_straggler_is_not_new_against_a_run_of_one_rank() -> None:
    """A one-rank run cannot have a straggler: against it, a run of several ranks' straggler is not compared."""
    from ranks.ranks_traces import job

    from collector.ranks.merge import merge_traces

    two = merge_traces(job(world=2, steps=8, slow_rank=1, delay_ns=3_000_000))
    one = job(world=1, steps=8)[0]
    c = compare(one, two)
    assert "straggler" not in c.findings["new"] and "straggler" in c.findings["unseen"]
