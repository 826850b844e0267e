"""Columns built side by side: numpy's ``take`` (and other array calls) release the GIL, so the columns of
a million-row frame, and the page faults of their fresh arrays, are made by several threads at once.

Used where the importer puts a frame's columns in start order (a dozen gathers of a million rows each), and
where a recording's own rows are dropped from its frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from collector.traceformat.deflate import workers

T = TypeVar("T")
PARALLEL_ROWS = 200_000
"""Rows per call below which the calls run one after another (threads would cost more than they save)."""


def side_by_side(calls: Sequence[Callable[[], T]], rows: int) -> list[T]:
    """The results of ``calls`` (each a function of no arguments, about ``rows`` rows of work), in order;
    run by a few threads when the work is large, else one after another."""
    threads = min(workers(), len(calls))
    if threads < 2 or rows < PARALLEL_ROWS:
        return [call() for call in calls]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda call: call(), calls))


def take_all(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """``[values[positions] for values, positions in pairs]``, side by side when large."""

    def taker(values: np.ndarray, positions: np.ndarray) -> Callable[[], Any]:
        return lambda: values.take(positions)

    rows = max((len(p) for _, p in pairs), default=0)
    return side_by_side([taker(v, p) for v, p in pairs], rows)


def take_rows(frame: pd.DataFrame, positions: np.ndarray) -> pd.DataFrame:
    """``frame.iloc[positions]`` with a fresh RangeIndex, its columns gathered side by side (a categorical by
    its codes; a column of another pandas type by pandas)."""

    def column(series: pd.Series) -> Callable[[], Any]:
        dtype = series.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            codes = series.cat.codes.to_numpy()
            return lambda: pd.Categorical.from_codes(codes.take(positions), dtype=dtype)
        if isinstance(dtype, np.dtype):
            values = series.to_numpy()
            return lambda: values.take(positions)
        return lambda: series.take(positions).reset_index(drop=True)

    made = side_by_side([column(frame[c]) for c in frame.columns], len(positions))
    return pd.DataFrame(dict(zip(frame.columns, made, strict=True)), copy=False)
