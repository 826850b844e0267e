"""Level of detail: box budgets, exact busy time of merged boxes, both the raw and the prefix-sum path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from web_helpers import copy_trace

from collector.model import Lane, LaneKind, RunMeta, Trace, conform_intervals, empty_markers
from collector.synthetic import synthetic_trace
from webapp.analysis import intervals as iv
from webapp.analysis.lod import RunIndex, water_level


def union_len(s: np.ndarray, e: np.ndarray) -> int:
    return iv.union(s, e).total


def stream_trace(n: int, seed: int = 0) -> Trace:
    """One GPU stream of ``n`` non-overlapping kernels: mostly tiny, a few long, random gaps."""
    rng = np.random.default_rng(seed)
    dur = np.where(rng.random(n) < 0.01, rng.integers(50_000, 500_000, n), rng.integers(100, 3_000, n))
    gap = np.where(rng.random(n) < 0.05, rng.integers(10_000, 200_000, n), rng.integers(0, 800, n))
    start = np.cumsum(gap + np.concatenate([[0], dur[:-1]]))
    frame = conform_intervals(
        pd.DataFrame(
            {
                "lane": 0,
                "rank": 0,
                "lane_kind": "compute_stream",
                "stream": 7,
                "lane_label": "s7",
                "kind": np.where(rng.random(n) < 0.1, "memset", "kernel"),
                "name": "k",
                "start_ns": start,
                "end_ns": start + dur,
            }
        )
    )
    return Trace(RunMeta(), (Lane(0, LaneKind.COMPUTE_STREAM, 7, "s7"),), frame, empty_markers())


@pytest.mark.parametrize("raw_limit", [10**9, 1000])  # exact wide/narrow split; prefix-sum path
@pytest.mark.parametrize("window", [(0.0, 1.0), (0.3, 0.35), (0.5, 0.5005)])
def test_merged_boxes_cover_exactly_the_busy_time(raw_limit: int, window: tuple[float, float]) -> None:
    idx = RunIndex(stream_trace(30_000))
    span = idx.end_ns - idx.origin_ns
    t0 = idx.origin_ns + int(span * window[0])
    t1 = idx.origin_ns + int(span * window[1])
    lod = idx.lane(0, t0, t1, width_px=800, raw_limit=raw_limit)
    s, e = idx.start, idx.end
    vis = (e > t0) & (s < t1)
    assert lod.n_boxes <= 2000
    # every visible interval is sent alone or counted in exactly one busy box
    assert len(lod.rows) + int(lod.busy_count.sum()) == int(vis.sum())
    for bs, be, n, busy in zip(lod.busy_start_ns, lod.busy_end_ns, lod.busy_count, lod.busy_ns, strict=True):
        members = vis & (s >= bs) & (e <= be)
        assert int(members.sum()) == n
        cs, ce = np.maximum(s[members], t0), np.minimum(e[members], t1)
        if raw_limit > 10**6:  # raw path clips to the window; prefix path reports whole boxes
            assert busy == union_len(cs, ce)
        else:
            assert busy == union_len(s[members], e[members])
        assert 0 < busy <= be - bs
    # the boxes are disjoint on a stream, so busy time adds up to the lane's busy time in the window
    sent = np.zeros(len(s), dtype=bool)
    sent[lod.rows] = True
    if raw_limit > 10**6:
        total = union_len(np.maximum(s[sent], t0), np.minimum(e[sent], t1)) + int(lod.busy_ns.sum())
        assert total == union_len(np.maximum(s[vis], t0), np.minimum(e[vis], t1))


def test_budget_per_lane_and_per_view() -> None:
    trace = synthetic_trace(200_000, ranks=4, steps=10, pattern="overlap")
    idx = RunIndex(trace)
    lods = idx.view(idx.origin_ns, idx.end_ns, width_px=3000)
    assert len(lods) == len(trace.lanes) == 12
    assert all(x.n_boxes <= 2000 for x in lods)
    assert sum(x.n_boxes for x in lods) <= 10_000
    small = idx.view(idx.origin_ns, idx.end_ns, width_px=3000, max_per_view=1200)
    assert sum(x.n_boxes for x in small) <= 1200


def test_zooming_in_refines_to_single_intervals() -> None:
    idx = RunIndex(stream_trace(5000))
    full = idx.lane(0, idx.origin_ns, idx.end_ns, 500)
    assert len(full.busy_count) > 0
    a = int(idx.start[2000])
    near = idx.lane(0, a, a + 20_000, 1000)
    assert len(near.busy_count) == 0 and len(near.rows) > 0
    assert (idx.start[near.rows] == near.start_ns).all()


def test_bad_windows() -> None:
    idx = RunIndex(stream_trace(100))
    with pytest.raises(ValueError, match="empty"):
        idx.view(10, 10, 100)
    with pytest.raises(ValueError, match="width_px"):
        idx.view(0, 10, 0)


def test_exposed_copies_are_copy_time_without_compute() -> None:
    trace = synthetic_trace(2000, pattern="naive", steps=4)
    idx = RunIndex(trace)
    f = idx.frame
    copies = f[f["kind"].astype(str).str.startswith("memcpy") & (f["lane_kind"] != "cpu_thread")]
    compute = f[(f["kind"] == "kernel") & (f["lane_kind"] != "cpu_thread")]
    s, e = idx.exposed[0]
    cu = iv.union(copies["start_ns"].to_numpy(), copies["end_ns"].to_numpy())
    ku = iv.union(compute["start_ns"].to_numpy(), compute["end_ns"].to_numpy())
    assert int((e - s).sum()) == cu.total - iv.intersect(cu, ku).total
    assert int((e - s).sum()) > 0


@pytest.mark.parametrize("window", [(0.0, 1.0), (0.1, 0.4), (0.33, 0.3301)])
def test_exposed_windows_with_many_windows_merge_by_gaps(
    window: tuple[float, float], monkeypatch: pytest.MonkeyPatch
) -> None:
    import webapp.analysis.lod as lod

    monkeypatch.setattr(lod, "RAW_LIMIT", 500)
    idx = RunIndex(copy_trace(20_000))
    s, e = idx.exposed[0]
    assert len(s) > 10_000 and 0 in idx.exposed_gaps
    span = idx.end_ns - idx.origin_ns
    t0, t1 = idx.origin_ns + int(span * window[0]), idx.origin_ns + int(span * window[1])
    bs, be = idx.exposed_view(0, t0, t1, width_px=800, cap=300)
    assert 0 < len(bs) <= 300
    assert np.all(be > bs) and np.all(bs[1:] > be[:-1])  # sorted, disjoint
    assert bs[0] >= t0 and be[-1] <= t1
    inside = (e > t0) & (s < t1)
    cs, ce = np.maximum(s[inside], t0), np.minimum(e[inside], t1)
    box = np.searchsorted(bs, cs, side="right") - 1  # every exposed window lies in one box
    assert np.all(box >= 0) and np.all(ce <= be[box])
    # and the boxes start and end where windows do (no time outside the windows' runs)
    assert set(bs.tolist()) <= set(cs.tolist()) and set(be.tolist()) <= set(ce.tolist())


def test_water_level_shares_the_budget_by_need() -> None:
    assert water_level(np.array([10, 5000, 5000]), 2010) == 1000
    assert water_level(np.array([10, 20, 5000]), 2000) == 1970
    assert water_level(np.array([10, 20]), 2000) == 20
    assert water_level(np.array([900, 900, 900]), 30) == 10


def test_a_quiet_lane_leaves_its_boxes_to_a_busy_one() -> None:
    """One busy lane of spread-out intervals and many quiet ones: the busy lane gets nearly all the budget
    instead of an even share, and the view stays within it."""
    busy = stream_trace(20_000)
    frame = busy.intervals
    quiet = [frame.iloc[:3].assign(lane=i + 1) for i in range(9)]
    lanes = (busy.lanes[0], *[Lane(0, busy.lanes[0].kind, 100 + i, f"q{i}") for i in range(9)])
    trace = Trace(busy.meta, lanes, conform_intervals(pd.concat([frame, *quiet], ignore_index=True)), busy.markers)
    idx = RunIndex(trace)
    alone = idx.lane(0, idx.origin_ns, idx.end_ns, 10_000).n_boxes
    lods = idx.view(idx.origin_ns, idx.end_ns, width_px=10_000, max_per_lane=2000, max_per_view=600)
    boxes = [x.n_boxes for x in lods]
    assert alone > 600 and sum(boxes) <= 600
    cap = water_level(np.array([alone, *boxes[1:]]), 600)
    assert cap == 600 - sum(boxes[1:])  # the quiet lanes' leftovers go to the busy one, not an even 60 each
    assert boxes[0] == idx.lane(0, idx.origin_ns, idx.end_ns, 10_000, cap).n_boxes > 60
    assert boxes[1:] == [idx.lane(i, idx.origin_ns, idx.end_ns, 10_000).n_boxes for i in range(1, 10)]
