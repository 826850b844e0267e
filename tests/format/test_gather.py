"""Columns gathered side by side give what pandas' own row selection gives."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from collector.traceformat import gather


@pytest.mark.parametrize("parallel", [False, True])
def test_take_rows_matches_iloc_for_every_column_type(parallel: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gather, "PARALLEL_ROWS", 0 if parallel else 10**9)
    monkeypatch.setattr(gather, "workers", lambda: 4)
    rng = np.random.default_rng(0)
    n = 1_000
    kinds = pd.Index(["kernel", "launch", "memset"])
    frame = pd.DataFrame(
        {
            "start_ns": rng.integers(0, 10**12, n),
            "lane": rng.integers(0, 5, n).astype(np.int32),
            "non_blocking": rng.random(n) < 0.5,
            "kind": pd.Categorical.from_codes(rng.integers(-1, 3, n), categories=kinds),
            "label": rng.choice(["a", "b", "c"], n).astype(object),
            "count": pd.array(rng.integers(0, 9, n), dtype="Int64"),
        },
        index=np.arange(n) * 3,
    )
    positions = np.sort(rng.choice(n, 700, replace=False))
    got = gather.take_rows(frame, positions)
    pd.testing.assert_frame_equal(got, frame.iloc[positions].reset_index(drop=True))


def test_take_all_and_side_by_side_keep_the_order_of_the_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gather, "PARALLEL_ROWS", 0)
    monkeypatch.setattr(gather, "workers", lambda: 3)
    values = [np.arange(10) * k for k in range(1, 6)]
    order = np.array([9, 0, 4, 4])
    assert [a.tolist() for a in gather.take_all([(v, order) for v in values])] == [(v[order]).tolist() for v in values]

    def square(k: int) -> Callable[[], int]:
        return lambda: k * k

    assert gather.side_by_side([square(k) for k in range(7)], rows=1) == [0, 1, 4, 9, 16, 25, 36]
