"""Merge, clock alignment and the straggler finding on synthetic jobs with planted offsets and stragglers."""

from __future__ import annotations

import pytest
from ranks_traces import MS, job, nccl_job

from collector.ranks.align import matched_collectives
from collector.ranks.merge import MergeError, alignment_rows, merge_traces
from webapp.analysis.run import analyze


def _aligned(world: int, offsets: list[int], hosts: list[str]) -> dict[int, dict]:
    merged = merge_traces(job(world, offsets=offsets, hosts=hosts))
    return {row["rank"]: row for row in alignment_rows(merged)}


def test_planted_offsets_on_other_hosts_are_recovered_within_the_residual() -> None:
    offsets = [0, 3_700 * 1000, -950 * 1000, 12 * MS]
    rows = _aligned(4, offsets, ["a", "b", "c", "d"])
    for r, planted in enumerate(offsets):
        found = -rows[r]["offset_ns"]  # the offset is what is added to undo the planted shift
        assert abs(found - planted) <= max(rows[r]["residual_ns"], 1) + 20_000, (r, found, planted)
        assert rows[r]["anchors"] == 13  # the barrier and 12 all_reduces
        assert rows[r]["residual_ns"] < 20_000  # ends jitter by at most 20 us in these traces


def test_ranks_on_one_host_share_its_clock() -> None:
    rows = _aligned(4, [0, 0, 5 * MS, 5 * MS], ["a", "a", "b", "b"])
    assert rows[0]["offset_ns"] == rows[1]["offset_ns"] == 0
    assert rows[2]["offset_ns"] == rows[3]["offset_ns"]
    assert abs(rows[2]["offset_ns"] + 5 * MS) < 20_000


def test_merged_trace_lines_collective_ends_up() -> None:
    merged = merge_traces(job(2, offsets=[0, 40 * MS], hosts=["a", "b"]))
    m = matched_collectives(merged.intervals)
    skew = m.groupby("seq")["end_ns"].agg(lambda e: e.max() - e.min())
    assert skew.max() < 40_000
    assert merged.meta.world_size == 2 and merged.ranks == [0, 1]
    assert len(merged.lanes) == 4 and merged.intervals["id"].is_unique


def test_merge_refuses_one_file_and_a_repeated_rank() -> None:
    one = job(2)
    with pytest.raises(MergeError, match="at least two ranks"):
        merge_traces(one[:1])
    with pytest.raises(MergeError, match="rank 0 is in more than one file"):
        merge_traces([one[0], one[0]], ["a.json", "b.json"])


@pytest.mark.parametrize("cause,label", [("data", "data loading"), ("compute", "extra compute")])
def test_planted_straggler_is_named_with_its_cause_and_cost(cause: str, label: str) -> None:
    traces = job(4, slow_rank=2, delay_ns=8 * MS, cause=cause, offsets=[0, 2 * MS, -1 * MS, 7 * MS], hosts="abcd")
    analysis = analyze(merge_traces(traces))
    straggler = [f for f in analysis.findings if f.rule == "straggler"]
    assert len(straggler) == 1
    found = analysis.ranks["straggler"]
    assert found["rank"] == 2 and found["cause"] == label and found["last_frac"] > 0.9
    assert 7 * MS < straggler[0].cost_per_step_ns < 9 * MS
    assert "Rank 2" in straggler[0].title and label in straggler[0].detail


def test_what_if_lands_near_the_job_without_the_straggler() -> None:
    clean = analyze(merge_traces(job(4, seed=1)))
    slow = analyze(merge_traces(job(4, slow_rank=1, delay_ns=10 * MS, seed=1)))
    clean_step = clean.metrics["step_time_median_ns"]
    estimate = slow.ranks["what_if"]["step_time_without_straggler_ns"]
    assert slow.ranks["what_if"]["step_time_now_ns"] > clean_step + 8 * MS
    assert abs(estimate - clean_step) < 0.1 * clean_step


def test_no_straggler_finding_without_a_plant() -> None:
    analysis = analyze(merge_traces(job(4, offsets=[0, 3 * MS, 0, -2 * MS], hosts="abcd", seed=3)))
    assert not [f for f in analysis.findings if f.rule == "straggler"]
    assert "straggler" not in analysis.ranks
    assert analysis.ranks["collective_count"] == 13
    assert any("aligned on the ends of their collectives" in n for n in analysis.notes)


def test_a_rank_that_is_last_but_costs_little_is_a_note_not_a_finding() -> None:
    analysis = analyze(merge_traces(job(4, slow_rank=2, delay_ns=1 * MS, cause="compute", seed=2)))
    assert not [f for f in analysis.findings if f.rule == "straggler"]
    note = next(n for n in analysis.notes if n.startswith("Rank 2 arrives last"))
    assert "wait only 1.0" in note and "under the 20%" in note


def test_collective_table_has_latency_waits_and_skews() -> None:
    analysis = analyze(merge_traces(job(2, slow_rank=1, delay_ns=5 * MS)))
    rows = analysis.ranks["collectives"][1:]  # after the barrier
    assert all(r["last_rank"] == 1 for r in rows)
    assert all(400_000 <= r["comm_latency_ns"] <= 600_000 for r in rows)
    assert all(r["start_skew_ns"] > 4 * MS and r["end_skew_ns"] < 20_000 for r in rows)
    per_rank = {r["rank"]: r for r in analysis.ranks["per_rank"]}
    assert per_rank[0]["wait_ns"] > 4 * MS > per_rank[1]["wait_ns"]


def test_a_straggler_on_gpu_ranks_costs_what_its_replayed_fix_saves() -> None:
    """The others' all_reduce waits for the slow rank's backward; the optimizer waits for the all_reduce and
    the host for the optimizer, so the wait is on every step's path: the replay saves all of it."""
    clean = analyze(merge_traces(nccl_job(delay_ns=0)))
    slow = analyze(merge_traces(nccl_job(delay_ns=6 * MS)))
    straggler = [f for f in slow.findings if f.rule == "straggler"]
    assert len(straggler) == 1 and straggler[0].severity == "critical"
    assert 5.7 * MS < straggler[0].cost_per_step_ns < 6.3 * MS
    assert slow.ranks["straggler"]["replayed"] is True
    without = slow.ranks["what_if"]["step_time_without_straggler_ns"]
    assert abs(without - clean.metrics["step_time_median_ns"]) < 0.05 * clean.metrics["step_time_median_ns"]
    assert abs(slow.what_if["step_time_fixed_ns"] - without) < 0.05 * without


def test_a_straggler_whose_wait_runs_beside_longer_host_work_costs_almost_nothing() -> None:
    """Host-bound ranks: each step's 25 ms of host work dwarfs the 6 ms the GPU's all_reduce waits for the
    slow rank, so the step is no shorter without the wait (the last step, with nothing after it, is). The wait
    is still reported; the cost is a small info at most."""
    result = analyze(merge_traces(nccl_job(delay_ns=6 * MS, host_ns=25 * MS, sync=False, steps=30)))
    found = result.ranks["straggler"]
    assert found["rank"] == 1 and 5.5 * MS < found["wait_per_step_ns"] < 6.5 * MS
    assert found["saving_per_step_ns"] < 0.05 * found["wait_per_step_ns"]
    listed = [f for f in result.findings if f.rule == "straggler"]
    assert all(f.severity == "info" and f.cost_per_step_ns < 0.05 * found["wait_per_step_ns"] for f in listed)
    assert abs(result.what_if["step_time_fixed_ns"] - result.what_if["step_time_now_ns"]) < 0.01 * 25 * MS


def test_lockstep_gives_the_straggler_the_others_value_of_each_step_and_keeps_its_own_elsewhere() -> None:
    from types import SimpleNamespace

    import numpy as np

    from webapp.analysis.ranks import lockstep

    rd = SimpleNamespace(win_rank=np.array([0, 0, 1, 1, 1]), win_step=np.array([0, 1, 0, 1, 2]))
    out = lockstep(rd, np.array([10.0, 12.0, 16.0, 16.0, 16.0]), 1)  # type: ignore[arg-type]
    assert out.tolist() == [10.0, 12.0, 10.0, 12.0, 16.0]  # step 2: no other rank has it


def test_a_clock_residual_that_is_a_fair_share_of_a_step_is_said() -> None:
    """Collective ends that disagree by up to 2 ms (steps of ~7 ms) leave a residual the waits cannot see
    past; ends within 20 us do not."""
    noisy = analyze(merge_traces(job(2, offsets=[0, 40 * MS], hosts="ab", end_jitter_ns=2 * MS)))
    said = [n for n in noisy.notes if "clock residual" in n]
    assert len(said) == 1 and said[0].startswith("Rank 1's clock residual (0.") and "of the median step" in said[0]
    clean = analyze(merge_traces(job(2, offsets=[0, 40 * MS], hosts="ab")))
    assert not [n for n in clean.notes if "clock residual" in n]
    assert [n for n in clean.notes if n.startswith("Rank clocks aligned on the ends of their collectives")]


def test_a_multi_rank_set_up_is_the_longest_ranks_not_the_sum() -> None:
    result = analyze(merge_traces(job(4, offsets=[0, 2 * MS, -1 * MS, 7 * MS], hosts="abcd")))
    setup = result.phases[result.phases["phase"] == "setup"]
    assert len(setup) == 4 and result.metrics["setup_ns"] == setup["dur_ns"].max() < setup["dur_ns"].sum()
    note = next(n for n in result.notes if n.startswith("Set-up before the first step"))
    assert f"{setup['dur_ns'].max() / 1e6:.2f} ms on the longest of 4 ranks; over all ranks, in collectives" in note


def test_a_straggler_whose_cause_is_on_its_host_names_where_its_host_time_went() -> None:
    """Rank 2 loads data 8 ms longer per step: its sampled stacks put the time in load_batch."""
    traces = job(4, slow_rank=2, delay_ns=8 * MS, cause="data", stacks=True)
    finding = next(f for f in analyze(merge_traces(traces)).findings if f.rule == "straggler")
    assert "Cause on rank 2: data loading" in finding.detail
    assert "Where rank 2's host time went: load_batch (train.py:22) " in finding.detail
    compute = job(4, slow_rank=2, delay_ns=8 * MS, cause="compute", stacks=True)
    finding = next(f for f in analyze(merge_traces(compute)).findings if f.rule == "straggler")
    assert "extra compute" in finding.detail and "host time went" not in finding.detail  # on GPU ranks: the device
