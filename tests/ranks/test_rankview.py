"""Summary lanes (one per rank: busy, comm, idle) and the rank x step grid, on merged synthetic jobs."""

from __future__ import annotations

import numpy as np
import pytest
from ranks_traces import MS, job

from collector.model import Trace
from collector.ranks.merge import merge_traces
from webapp.analysis import intervals as iv
from webapp.analysis.lod import RunIndex
from webapp.analysis.rankview import MAX_CELLS, rank_summary, step_grid, summary_bins


def _merged(world: int = 4, **kw: object) -> Trace:
    return merge_traces(job(world, **kw))


def _union_in(trace: Trace, rank: int, kind: str, t0: int, t1: int) -> int:
    df = trace.intervals
    m = (df["rank"] == rank) & (df["kind"].astype(str) == kind)
    s = np.clip(df.loc[m, "start_ns"].to_numpy(np.int64), t0, t1)
    e = np.clip(df.loc[m, "end_ns"].to_numpy(np.int64), t0, t1)
    return iv.union(s, e).total


def test_summary_lanes_measure_each_ranks_comm_and_work() -> None:
    trace = _merged(slow_rank=2, delay_ns=8 * MS)
    index = RunIndex(trace)
    t0, t1 = index.origin_ns, index.end_ns
    out = rank_summary(index, t0, t1, 400)
    assert [r["rank"] for r in out["ranks"]] == [0, 1, 2, 3] and out["bins"] == 400
    for r in out["ranks"]:
        busy, comm = np.asarray(r["busy"]), np.asarray(r["comm"])
        assert len(busy) == len(comm) == 400
        assert (busy >= 0).all() and (comm >= 0).all() and (busy + comm <= 101).all()
        expected = _union_in(trace, r["rank"], "collective", t0, t1) / (t1 - t0)
        assert r["comm_frac"] == pytest.approx(expected, rel=1e-9)
        assert comm.sum() * out["bin_ns"] / 100 == pytest.approx(expected * (t1 - t0), rel=0.02)
    by_rank = {r["rank"]: r for r in out["ranks"]}
    # the others wait for rank 2 inside the all_reduce; rank 2 works longer instead
    assert all(by_rank[r]["comm_frac"] > 3 * by_rank[2]["comm_frac"] for r in (0, 1, 3))
    assert all(by_rank[2]["busy_frac"] > by_rank[r]["busy_frac"] for r in (0, 1, 3))


def test_summary_lane_of_a_window_inside_one_collective_is_all_comm() -> None:
    trace = _merged()
    index = RunIndex(trace)
    df = trace.intervals
    coll = df[(df["rank"] == 0) & (df["name"] == "gloo:all_reduce")].iloc[3]
    a, b = int(coll["start_ns"]), int(coll["end_ns"])
    out = rank_summary(index, a + (b - a) // 4, b - (b - a) // 4, 20, [0])
    assert out["ranks"][0]["comm"] == [100] * 20 and out["ranks"][0]["busy"] == [0] * 20
    with pytest.raises(ValueError, match="empty"):
        rank_summary(index, b, a, 20)


def test_many_ranks_get_fewer_bins() -> None:
    assert summary_bins(1600, 4) == 1600
    assert summary_bins(1600, 4096) == MAX_CELLS // 4096
    assert summary_bins(1600, 10**7) == 50


def test_step_grid_lays_out_step_time_and_wait_per_rank() -> None:
    from webapp.analysis.run import analyze

    analysis = analyze(_merged(slow_rank=1, delay_ns=6 * MS))
    grid = analysis.ranks["grid"]
    assert grid["ranks"] == [0, 1, 2, 3] and grid["steps"] == list(range(12))
    wait = np.asarray(grid["wait_ns"], dtype=np.float64)
    assert wait.shape == (4, 12)
    assert (wait[1] < 0.1 * MS).all()  # the straggler arrives last: it hardly waits
    assert (wait[[0, 2, 3]] > 5 * MS).all()
    per_step = {(s["rank"], s["step"]): s for s in analysis.per_step.to_dict("records")}
    for i, r in enumerate(grid["ranks"]):
        for j, k in enumerate(grid["steps"]):
            assert grid["step_time_ns"][i][j] == pytest.approx(per_step[(r, k)]["step_time_ns"])
            assert grid["end_ns"][i][j] - grid["start_ns"][i][j] == grid["step_time_ns"][i][j]


def test_step_grid_leaves_missing_steps_empty() -> None:
    import pandas as pd

    steps = pd.DataFrame({"rank": [0, 0, 1], "step": [0, 1, 0], "step_time_ns": [5, 6, 7], "wait_ns": [1, 2, 3]})
    grid = step_grid(steps, np.asarray([0, 10, 0]), np.asarray([5, 16, 7]))
    assert grid["step_time_ns"] == [[5, 6], [7, None]] and grid["wait_ns"][1] == [3, None]
    assert step_grid(steps.iloc[:0], np.zeros(0), np.zeros(0)) == {}
