"""The coarse level of the index (webapp.analysis.lodlevel): wide windows drawn from folded runs of short
intervals give exactly the boxes of the intervals one by one (lodboxes.lod_lane), for nested, overlapping,
touching and empty intervals, windows that cut through folds and long intervals, and every box budget."""

from __future__ import annotations

from dataclasses import replace

import msgspec
import numpy as np
import pandas as pd
import pytest

from collector.model import Lane, LaneKind, RunMeta, Trace, conform_intervals, empty_markers
from collector.ranks.merge import merge_traces
from collector.synthetic.ranks import rank_job
from webapp.analysis.lod import RunIndex
from webapp.analysis.lodboxes import LaneLod, lod_lane, window_slice
from webapp.timeline import view_payload

FIELDS = (
    "lane",
    "rows",
    "start_ns",
    "end_ns",
    "kind",
    "busy_start_ns",
    "busy_end_ns",
    "busy_count",
    "busy_ns",
    "busy_kind",
)


def _kernels(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A stream: tiny kernels close together, a few long ones, a few long gaps, some touching."""
    dur = np.where(rng.random(n) < 0.02, rng.integers(200_000, 3_000_000, n), rng.integers(0, 4_000, n))
    gap = np.where(rng.random(n) < 0.03, rng.integers(100_000, 2_000_000, n), rng.integers(0, 900, n))
    start = np.cumsum(gap + np.concatenate([[0], dur[:-1]]))
    return start, start + dur


def _host(rng: np.random.Generator, n: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    """A host thread: long spans (some nested, some ending half-way through others) over runs of short ops,
    and zero-length marks."""
    outer_s = np.sort(rng.integers(0, span, n // 50))
    outer_e = outer_s + rng.integers(300_000, 8_000_000, len(outer_s))
    op_s = np.sort(rng.integers(0, span, n))
    op_e = op_s + np.where(rng.random(n) < 0.1, 0, rng.integers(1, 20_000, n))
    return np.concatenate([outer_s, op_s]), np.concatenate([outer_e, op_e])


def tricky_trace(seed: int) -> Trace:
    rng = np.random.default_rng(seed)
    k_s, k_e = _kernels(rng, 6000)
    h_s, h_e = _host(rng, 5000, int(k_e.max()))
    c_s, c_e = _kernels(rng, 300)
    parts = [(0, LaneKind.COMPUTE_STREAM, k_s, k_e), (1, LaneKind.CPU_THREAD, h_s, h_e)]
    parts.append((2, LaneKind.COMM_STREAM, c_s * 20, c_e * 20))  # sparse: hardly anything to fold
    d_s, d_e = _host(rng, 5000, int(k_e.max()) // 20)  # ops overlapping each other and the long spans
    parts.append((3, LaneKind.CPU_THREAD, d_s, d_e))
    frames = [
        pd.DataFrame(
            {
                "lane": lane,
                "rank": 0,
                "lane_kind": kind.value,
                "stream": lane,
                "lane_label": f"lane {lane}",
                "kind": np.where(rng.random(len(s)) < 0.2, "memset", "kernel"),
                "name": "op",
                "start_ns": s,
                "end_ns": e,
            }
        )
        for lane, kind, s, e in parts
    ]
    lanes = tuple(Lane(lane, kind, lane, f"lane {lane}") for lane, kind, _, _ in parts)
    frame = conform_intervals(pd.concat(frames, ignore_index=True))
    return Trace(RunMeta(), lanes, frame.sort_values(["lane", "start_ns"], kind="stable"), empty_markers())


def one_by_one(index: RunIndex, lane: int, t0: int, t1: int, width: int, cap: int) -> LaneLod:
    lo, hi = index.lane_bounds[lane]
    sl = slice(lo, hi)
    out = lod_lane(lane, index.start[sl], index.end[sl], index.kind[sl], index.cummax[sl], t0, t1, width, cap)
    return replace(out, rows=out.rows + lo)


def assert_same(got: LaneLod, want: LaneLod) -> None:
    for field in FIELDS:
        assert np.array_equal(getattr(got, field), getattr(want, field)), field
    assert got.px_ns == want.px_ns


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_wide_windows_from_the_level_give_the_boxes_of_the_intervals_one_by_one(seed: int) -> None:
    index = RunIndex(tricky_trace(seed))
    level = index.level
    assert len(level.first) > 0 and int(level.count.sum()) > len(index.start) // 4
    o, span = index.origin_ns, index.end_ns - index.origin_ns
    rng = np.random.default_rng(seed)
    windows = [(o, o + span), (o - 5, o + span + 5), (o + span // 3, o + span)]
    for _ in range(12):  # wide windows with edges anywhere (inside folds, inside long spans)
        a = int(rng.integers(-span // 20, span // 2))
        windows.append((o + a, o + a + int(rng.integers(span // 4, span))))
    served = 0
    for t0, t1 in windows:
        for width in (200, 1240, 10_000):
            for cap in (2000, 60, 3):
                for lane in range(len(index.lanes)):
                    lo, hi = index.lane_bounds[lane]
                    i0, i1 = window_slice(index.start[lo:hi], index.cummax[lo:hi], t0, t1)
                    arrays = (index.start, index.end, index.kind)
                    served += level.lane(lane, arrays, (lo + i0, lo + i1), t0, t1, width, cap) is not None
                    assert_same(index.lane(lane, t0, t1, width, cap), one_by_one(index, lane, t0, t1, width, cap))
    assert served > len(windows) * 3  # the level drew many of them (the others fell back to the intervals)


def test_whole_run_payload_is_the_one_recomputed_from_the_intervals() -> None:
    run = merge_traces(rank_job(4, 4000, steps=6, ranks_per_host=2, seed=3))
    index = RunIndex(run)
    off = RunIndex(run)
    off._level = replace(off.level, p0_ns=float("inf"))  # never applies: every lane from its intervals
    o, span = index.origin_ns, index.end_ns - index.origin_ns
    for t0, t1, width, ranks in [
        (o, o + span, 1240, None),
        (o, o + span, 1600, frozenset({1, 2})),
        (o + span // 5, o + span, 900, None),
    ]:
        got = msgspec.json.encode(view_payload(index, t0, t1, width, ranks=ranks))
        assert got == msgspec.json.encode(view_payload(off, t0, t1, width, ranks=ranks))
