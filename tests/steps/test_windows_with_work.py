"""Step windows that hold no interval of their rank are dropped where the rank has other windows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from webapp.analysis.steps import _with_work


def _steps(rows: list[tuple[int, int, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["rank", "step", "start_ns", "end_ns"]).astype("int64")


def test_an_empty_window_goes_per_rank_and_a_ranks_only_window_stays() -> None:
    # rank 0: work in [0, 100) and [100, 200), none in [200, 300); rank 1: work only before its one window;
    # rank 2: starts unsorted across ranks, work in its second window only
    rank = np.array([2, 0, 0, 1, 0, 2], dtype=np.int64)
    start = np.array([450, 10, 150, 5, 120, 420], dtype=np.int64)
    steps = _steps(
        [(0, 0, 0, 100), (0, 1, 100, 200), (0, 2, 200, 300), (1, 0, 50, 60), (2, 0, 300, 400), (2, 1, 400, 500)]
    )
    kept = _with_work(steps, rank, start)
    assert list(zip(kept["rank"], kept["step"], strict=True)) == [(0, 0), (0, 1), (1, 0), (2, 1)]


def test_windows_reaching_outside_the_run_count_only_their_ranks_work() -> None:
    rank = np.array([0, 1], dtype=np.int64)
    start = np.array([100, 100], dtype=np.int64)
    steps = _steps([(0, 0, -50, 90), (0, 1, 90, 10_000), (1, 0, 101, 10_000), (1, 1, 10_000, 20_000)])
    kept = _with_work(steps, rank, start)
    assert list(zip(kept["rank"], kept["step"], strict=True)) == [(0, 1)]


def _brute(rank: np.ndarray, start: np.ndarray, steps: pd.DataFrame) -> list[bool]:
    return [
        bool(((rank == r) & (start >= a) & (start < b)).any())
        for r, a, b in zip(steps["rank"], steps["start_ns"], steps["end_ns"], strict=True)
    ]


def test_tiled_and_overlapping_windows_agree_with_a_scan_of_every_interval() -> None:
    """Tiled windows (each start lands in one window, no sort) and overlapping ones (sorted starts) both keep
    exactly the windows a scan of every interval finds work in; CHUNK_ROWS made small so blocks meet."""
    import webapp.analysis.intervals as iv
    from webapp.analysis.steps import _holding

    rng = np.random.default_rng(3)
    rank = rng.integers(0, 3, 5_000).astype(np.int64)
    start = rng.integers(0, 100_000, 5_000).astype(np.int64) * 7
    saved, iv.CHUNK_ROWS = iv.CHUNK_ROWS, 700
    try:
        for overlapping in (False, True):
            rows = []
            for r in range(3):
                cuts = np.sort(rng.choice(np.arange(0, 800_000, 50), 40, replace=False))
                ends = np.append(cuts[1:], 800_000)
                if overlapping:
                    ends = ends + rng.integers(0, 30_000, len(ends))
                rows += [(r, k, int(a), int(b)) for k, (a, b) in enumerate(zip(cuts, ends, strict=True))]
            rows.append((1, 99, 800_000, 800_000) if not overlapping else (1, 99, 123_450, 123_450))  # empty
            steps = _steps(rows)
            tb = iv.Timebase.fit(int(start.min()), int(start.max()), 2)
            lo, hi = int(start.min()), int(start.max())
            a = tb.to_axis(steps["rank"].to_numpy(), np.clip(steps["start_ns"].to_numpy(), lo, hi + 1))
            b = tb.to_axis(steps["rank"].to_numpy(), np.clip(steps["end_ns"].to_numpy(), lo, hi + 1))
            a_s, b_s = np.sort(a), b[np.argsort(a, kind="stable")]
            assert bool((a_s[1:] >= b_s[:-1]).all()) is not overlapping  # the path taken: no sort, or a sort
            got = _holding(tb, rank, start, a, b)
            assert got.tolist() == _brute(rank, start, steps), overlapping
    finally:
        iv.CHUNK_ROWS = saved
