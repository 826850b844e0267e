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
