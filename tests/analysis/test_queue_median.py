"""The time-weighted median queue depth per window against a count at every nanosecond."""

from __future__ import annotations

import numpy as np
import pytest

from webapp.analysis import queue as queue_mod
from webapp.analysis.queue import LaneQueue, median_depth, windowed_median


def _brute(queue: LaneQueue, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = []
    for lo, hi in zip(a, b, strict=True):
        if hi <= lo:
            out.append(np.nan)
            continue
        depth = np.sort(queue.at(np.arange(lo, hi))[0])
        out.append(float(depth[(len(depth) + 1) // 2 - 1]))  # smallest d covering at least half the window
    return np.array(out)


@pytest.mark.parametrize("seed", range(8))
def test_windowed_median_matches_a_count_at_every_ns(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(40):
        n = int(rng.integers(0, 15))
        start = rng.integers(0, 60, n)
        queue = LaneQueue.build(start, start + rng.integers(0, 30, n))
        a = rng.integers(-5, 80, int(rng.integers(1, 7)))
        b = a + rng.integers(0, 40, len(a))
        np.testing.assert_array_equal(windowed_median(queue, a, b), _brute(queue, a, b))


def test_windowed_median_of_a_deep_queue() -> None:
    """Ten ops queued at 0 that end at 10, 20, ..., 100: the depth falls 10 -> 1 by steps of 10 ns."""
    queue = LaneQueue.build(np.zeros(10, np.int64), np.arange(10, 101, 10))
    got = windowed_median(queue, np.array([0, 0, 95, 100]), np.array([100, 40, 100, 100]))
    np.testing.assert_array_equal(got, [5.0, 8.0, 1.0, np.nan])


@pytest.mark.parametrize("chunk", [1, 3, 1 << 17])
def test_median_depth_in_groups_matches_the_whole_queue(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built a group of windows at a time from the ops that can be queued in it, the answer is the one of the
    queue of every op, whatever the group size (long ops queued long before a window included)."""
    monkeypatch.setattr(queue_mod, "CHUNK_OPS", chunk)
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.integers(0, 40))
        start = rng.integers(0, 200, n)
        end = start + np.where(rng.random(n) < 0.1, rng.integers(0, 200, n), rng.integers(0, 15, n))
        a = np.sort(rng.integers(-5, 220, int(rng.integers(1, 12))))
        b = a + rng.integers(0, 30, len(a))
        whole = windowed_median(LaneQueue.build(start, end), a, b)
        np.testing.assert_array_equal(median_depth(start, end, a, b), whole)
