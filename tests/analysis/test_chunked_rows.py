"""Routines over a whole run that take its rows a block at a time give what they give over all rows at once,
whatever the block size (empty input, one row, ranges across block boundaries)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from collector.model import COPY_CODES, GPU_CODES, INTERVAL_KIND_DTYPE
from collector.synthetic import synthetic_trace
from webapp.analysis import intervals as iv
from webapp.analysis import metrics
from webapp.analysis.context import codes_mask, prepare

BLOCKS = [1, 2, 3, 7, 1 << 18]


def _union_at_once(s: np.ndarray, e: np.ndarray, mask: np.ndarray) -> tuple[iv.Segments, np.ndarray]:
    rows = np.flatnonzero(mask)
    segs, first = iv.union_first(s[rows], e[rows])
    return segs, rows[first]


def _assert_same_union(got: tuple[iv.Segments, np.ndarray], want: tuple[iv.Segments, np.ndarray]) -> None:
    for name in ("starts", "ends", "cum"):
        np.testing.assert_array_equal(getattr(got[0], name), getattr(want[0], name))
        assert getattr(got[0], name).dtype == np.int64
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].dtype == np.int64


@pytest.mark.parametrize("block", BLOCKS)
def test_union_where_in_blocks_is_the_union_of_the_masked_ranges(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iv, "CHUNK_ROWS", block)
    rng = np.random.default_rng(block)
    for n in [0, 1, 2, 5, 30]:
        for _ in range(20):
            s = np.sort(rng.integers(0, 100, n))  # in start order: merged a block at a time
            e = s + rng.integers(0, 25, n)  # empty ranges too
            mask = rng.random(n) < 0.7
            _assert_same_union(iv.union_where(s, e, mask), _union_at_once(s, e, mask))
            shuffled = rng.permutation(n)  # out of order: sorted at once
            _assert_same_union(
                iv.union_where(s[shuffled], e[shuffled], mask), _union_at_once(s[shuffled], e[shuffled], mask)
            )


@pytest.mark.parametrize("block", BLOCKS)
def test_union_where_joins_ranges_that_touch_across_blocks(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iv, "CHUNK_ROWS", block)
    s = np.array([0, 10, 20, 35, 35, 50])
    e = np.array([10, 20, 30, 36, 60, 55])  # 0-30 back to back; 35-60 holds 50-55
    segs, first = iv.union_where(s, e, np.ones(6, dtype=bool))
    assert segs.starts.tolist() == [0, 35] and segs.ends.tolist() == [30, 60] and first.tolist() == [0, 3]
    segs, first = iv.union_where(s, e, np.array([False, False, False, False, False, False]))
    assert len(segs) == 0 and segs.total == 0 and first.dtype == np.int64 and not len(first)
    segs, first = iv.union_where(s, e, np.array([False, False, False, False, False, True]))
    assert segs.starts.tolist() == [50] and segs.ends.tolist() == [55] and first.tolist() == [5]


@pytest.mark.parametrize("block", BLOCKS)
def test_window_index_in_blocks(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    windows = iv.Segments.from_sorted(np.array([10, 20, 40]), np.array([20, 30, 45]))
    t = np.arange(-2, 50)
    want = iv._window_index(windows, t)
    monkeypatch.setattr(iv, "CHUNK_ROWS", block)
    np.testing.assert_array_equal(iv.window_index(windows, t), want)
    assert iv.window_index(windows, t[:0]).dtype == np.int64 and not len(iv.window_index(windows, t[:0]))


@pytest.mark.parametrize("block", BLOCKS)
def test_to_axis_in_place_is_to_axis(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(iv, "CHUNK_ROWS", block)
    tb = iv.Timebase.fit(100, 1_000, 3)
    rank = np.array([0, 3, 1, 2, 0], dtype=np.int32)
    t = np.array([100, 1_000, 500, 101, 999], dtype=np.int64)
    want = tb.to_axis(rank, t)
    got = tb.to_axis_in_place(rank, t)
    assert got is t
    np.testing.assert_array_equal(got, want)


def test_codes_mask_is_isin() -> None:
    codes = np.arange(-1, len(INTERVAL_KIND_DTYPE.categories), dtype=np.int16).repeat(3)
    for wanted in (GPU_CODES, COPY_CODES, (), (0,)):
        np.testing.assert_array_equal(codes_mask(codes, wanted), np.isin(codes, wanted))
    assert codes_mask(codes[:0], GPU_CODES).shape == (0,)


@pytest.mark.parametrize("block", BLOCKS[1:])
def test_kernel_table_in_blocks_and_over_sparse_keys(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rd = prepare(synthetic_trace(3_000, ranks=2, pattern="naive"))
    whole = metrics.kernel_table(rd)
    names, cats = rd.codes_of("name")
    sparse = metrics._op_sums_sparse(rd, names, max(len(cats), 1))
    monkeypatch.setattr(iv, "CHUNK_ROWS", block)
    pd.testing.assert_frame_equal(metrics.kernel_table(rd), whole, check_exact=True)
    span = len(INTERVAL_KIND_DTYPE.categories) * (max(len(cats), 1) + 1)
    dense = metrics._op_sums_dense(rd, names, max(len(cats), 1), span)
    for got, want in zip(dense, sparse, strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype == np.int64
