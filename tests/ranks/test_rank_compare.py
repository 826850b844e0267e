"""Comparing runs of several ranks: the per-rank table, the notes, and steps aligned on a chosen rank."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ranks_traces import MS, job

from collector.ranks.merge import merge_traces
from webapp.analysis.compare import compare
from webapp.analysis.run import analyze


def test_per_rank_table_shows_the_straggler_gone_and_the_wait_it_cost() -> None:
    slow = merge_traces(job(4, slow_rank=2, delay_ns=8 * MS, cause="data"))
    fixed = merge_traces(job(4, seed=1))
    c = compare(slow, fixed)
    t = c.ranks.set_index("rank")
    assert list(t.index) == [0, 1, 2, 3]
    # the others stop waiting for rank 2; rank 2 stops loading data for 8 ms more
    for r in (0, 1, 3):
        assert t.loc[r, "delta_wait_ns"] == pytest.approx(-8 * MS, rel=0.1)
        assert t.loc[r, "a_wait_ns"] - t.loc[r, "b_wait_ns"] == pytest.approx(-t.loc[r, "delta_wait_ns"])
    assert t.loc[2, "delta_data_ns"] == pytest.approx(-8 * MS, rel=0.1)
    assert t.loc[2, "a_last"] == 12 and t.loc[2, "b_last"] < 12
    step_a = analyze(slow).per_step
    assert t.loc[1, "a_step_time_ns"] == pytest.approx(step_a[step_a["rank"] == 1]["step_time_ns"].mean())
    assert any("Straggler A: rank 2 (data loading" in n and "B: none" in n for n in c.notes)
    assert any("lined up on one rank's step" in n for n in c.notes)
    records = c.to_dict()["ranks"]
    assert len(records) == 4 and records[2]["rank"] == 2


def test_different_rank_counts_are_matched_by_number_with_a_note() -> None:
    c = compare(merge_traces(job(4)), merge_traces(job(2)))
    t = c.ranks.set_index("rank")
    assert list(t.index) == [0, 1, 2, 3]
    assert np.isfinite(t.loc[1, "delta_step_time_ns"]) and math.isnan(t.loc[3, "b_step_time_ns"])
    assert "A has 4 ranks and B 2: ranks are compared by number." in c.notes


def test_one_rank_runs_have_no_rank_table_or_notes() -> None:
    from collector.synthetic import synthetic_trace

    c = compare(synthetic_trace(400, steps=3), synthetic_trace(400, pattern="overlap", steps=3))
    assert c.ranks.empty and c.notes == () and c.to_dict()["ranks"] == []


def test_steps_align_on_the_chosen_rank() -> None:
    a, b = merge_traces(job(4, seed=2)), merge_traces(job(4, seed=3))
    c = compare(a, b)
    for rank in (0, 3):
        ia, ib = c.step_aligned(4, 4, rank=rank)
        assert set(ia["rank"]) == {rank} and set(ib["rank"]) == {rank}
        assert ia["rel_start_ns"].min() <= 0 and ib["rel_start_ns"].min() <= 0
