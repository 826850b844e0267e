"""Interval algebra against a brute-force bitmap on random small inputs."""

from __future__ import annotations

import numpy as np
import pytest

from webapp.analysis import intervals as iv


def _bitmap(starts: np.ndarray, ends: np.ndarray, size: int) -> np.ndarray:
    bits = np.zeros(size, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        bits[s:e] = True
    return bits


def _random(rng: np.random.Generator, n: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    s = rng.integers(0, size - 1, n)
    return s, np.minimum(s + rng.integers(0, 30, n), size)


@pytest.mark.parametrize("seed", range(5))
def test_union_intersect_complement_match_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = 400
    a_s, a_e = _random(rng, 25, size)
    b_s, b_e = _random(rng, 25, size)
    a, b = iv.union(a_s, a_e), iv.union(b_s, b_e)
    ba, bb = _bitmap(a_s, a_e, size), _bitmap(b_s, b_e, size)
    assert a.total == ba.sum()
    assert (a.starts[1:] > a.ends[:-1]).all()  # disjoint and sorted
    assert iv.intersect(a, b).total == (ba & bb).sum()
    assert iv.union(np.concatenate([a.starts, b.starts]), np.concatenate([a.ends, b.ends])).total == (ba | bb).sum()
    win = iv.union(np.array([50, 200]), np.array([150, 390]))
    bw = _bitmap(np.array([50, 200]), np.array([150, 390]), size)
    assert iv.complement_in(win, a).total == (bw & ~ba).sum()
    lo, hi = np.array([0, 37, 120]), np.array([60, 300, 121])
    expect = [ba[x:y].sum() for x, y in zip(lo, hi, strict=True)]
    assert a.measure_in(lo, hi).tolist() == expect


def test_window_index_and_empty_sets() -> None:
    win = iv.union(np.array([0, 10]), np.array([5, 20]))
    assert iv.window_index(win, np.array([-1, 0, 4, 5, 10, 19, 20])).tolist() == [-1, 0, 0, -1, 1, 1, -1]
    empty = iv.empty()
    assert empty.measure_in(np.array([0]), np.array([10])).tolist() == [0]
    assert iv.intersect(empty, win).total == 0
    assert iv.complement_in(win, empty).total == 15


def test_union_first_reports_the_opening_interval() -> None:
    seg, first = iv.union_first(np.array([5, 0, 20, 22]), np.array([8, 10, 25, 30]))
    assert seg.starts.tolist() == [0, 20] and seg.ends.tolist() == [10, 30]
    assert first.tolist() == [1, 2]
