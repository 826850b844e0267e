"""Helpers on interval frames shared by the importers, the recorder and step finding (no I/O, no torch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import lookup_first
from collector.model import INTERVAL_COLUMNS, INTERVAL_DEFAULTS, NO_LAUNCH


def concat_keeping_codes(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """``a`` then ``b`` (same columns); categoricals keep their codes, with their categories united, so no
    string is made per row."""
    out: dict[str, Any] = {}
    for c in a.columns:
        x, y = a[c], b[c]
        if isinstance(x.dtype, pd.CategoricalDtype) and isinstance(y.dtype, pd.CategoricalDtype):
            out[c] = _united(x, y.cat.categories, y.cat.codes.to_numpy(np.int64))
        else:
            out[c] = np.concatenate([x.to_numpy(), y.to_numpy()])  # a new array: the frame's own
    return pd.DataFrame(out, copy=False)


def launch_rows(frame: pd.DataFrame) -> np.ndarray:
    """Row of the interval that launched each row (-1 where none), for a frame whose ids may be in any order."""
    ids = frame["id"].to_numpy(np.int64)
    launch = frame["launch_id"].to_numpy(np.int64)
    if not len(ids):
        return launch
    order = np.argsort(ids, kind="stable")
    pos = np.minimum(np.searchsorted(ids[order], launch), len(ids) - 1)
    row = order[pos]
    return np.where((launch >= 0) & (ids[row] == launch), row, -1)


def renumber_by_start(frame: pd.DataFrame) -> pd.DataFrame:
    """Sort by start (then lane) and renumber ids in that order, keeping launch links."""
    start, lane = frame["start_ns"].to_numpy(), frame["lane"].to_numpy()
    new = np.arange(len(frame), dtype=np.int64)
    step = np.diff(start)
    if not ((step > 0) | ((step == 0) & (np.diff(lane) >= 0))).all():
        frame = frame.take(np.lexsort((lane, start))).reset_index(drop=True)
    old = frame["id"].to_numpy(np.int64)
    if np.array_equal(old, new):  # in order and numbered already (the recorder imports by start)
        return frame
    pos = lookup_first(old, frame["launch_id"].to_numpy(np.int64))
    frame["launch_id"] = np.where(pos >= 0, new[np.maximum(pos, 0)], NO_LAUNCH)
    frame["id"] = new
    return frame


def appended_by_start(frame: pd.DataFrame, rows: dict[str, Any], n: int) -> pd.DataFrame:
    """``frame`` (INTERVAL_COLUMNS, as conformed) and ``n`` more rows, sorted by start (then lane) and numbered
    in that order with their launch links kept: what :func:`concat_keeping_codes`, :func:`renumber_by_start`
    and a conform give, in one pass over the columns (a short recording's stop pays per pandas operation).
    ``rows`` holds the new rows' columns: arrays of ``n``, strings for a categorical column, a
    ``pd.Categorical`` of a fixed-category column's dtype; ``start_ns``, ``end_ns`` and ``lane`` are required,
    other columns default to INTERVAL_DEFAULTS; ``id``, ``launch_id`` and ``dur_ns`` are made here (the new
    rows launch nothing)."""
    n0 = len(frame)
    start = np.concatenate([frame["start_ns"].to_numpy(np.int64), np.asarray(rows["start_ns"], dtype=np.int64)])
    end = np.concatenate([frame["end_ns"].to_numpy(np.int64), np.asarray(rows["end_ns"], dtype=np.int64)])
    lane = np.concatenate([frame["lane"].to_numpy(np.int32), np.asarray(rows["lane"], dtype=np.int32)])
    order = np.lexsort((lane, start))  # stable: equal keys keep frame's rows first, in their order
    new_id = np.empty(n0 + n, dtype=np.int64)
    new_id[order] = np.arange(n0 + n, dtype=np.int64)
    launcher = lookup_first(frame["id"].to_numpy(np.int64), frame["launch_id"].to_numpy(np.int64))
    launch = np.full(n0 + n, NO_LAUNCH, dtype=np.int64)
    launch[:n0] = np.where(launcher >= 0, new_id[np.maximum(launcher, 0)], NO_LAUNCH)
    made = {"id": new_id[order], "launch_id": launch[order], "start_ns": start[order], "end_ns": end[order]}
    made["dur_ns"], made["lane"] = made["end_ns"] - made["start_ns"], lane[order]
    out: dict[str, Any] = {}
    for name, (dtype, _) in INTERVAL_COLUMNS.items():
        if name in made:
            out[name] = made[name]
            continue
        old, new = frame[name], rows.get(name, INTERVAL_DEFAULTS.get(name))
        if isinstance(dtype, pd.CategoricalDtype):
            codes = np.concatenate([_codes_in(old, dtype), _codes_in(new, dtype, n)])
            out[name] = pd.Categorical.from_codes(codes[order], dtype=dtype)
        elif dtype == "category":
            labels: Any
            if isinstance(new, str):
                labels, codes = [new], np.zeros(n, dtype=np.int64)
            else:
                codes, labels = pd.factorize(np.asarray(new, dtype=object))
            out[name] = _united(old, labels, codes, order)
        else:
            added = np.broadcast_to(np.asarray(new, dtype=dtype), (n,))
            out[name] = np.concatenate([old.to_numpy(dtype), added])[order]
    return pd.DataFrame(out, copy=False)


def _codes_in(values: Any, dtype: pd.CategoricalDtype, n: int = -1) -> np.ndarray:
    """Codes of ``values`` in ``dtype``'s categories: a column or categorical of that dtype as it is, a single
    value ``n`` times (``n >= 0``), else anything pandas can read as that dtype."""
    if n >= 0 and isinstance(values, str):
        return np.full(n, dtype.categories.get_loc(values), dtype=np.int64)
    have = getattr(values, "dtype", None)
    if isinstance(have, pd.CategoricalDtype) and have.categories.equals(dtype.categories):
        codes = values.cat.codes if isinstance(values, pd.Series) else values.codes
        return np.asarray(codes, dtype=np.int64)
    return np.asarray(pd.Categorical(values, dtype=dtype).codes, dtype=np.int64)


def _united(old: pd.Series, labels: Any, codes: np.ndarray, order: np.ndarray | None = None) -> pd.Categorical:
    """A categorical column: ``old``'s values, then rows given as ``codes`` into ``labels`` (-1: missing), in
    ``old``'s categories followed by the labels it lacks (as strings); taken in ``order`` if given. No string is
    made per row."""
    index = {str(v): i for i, v in enumerate(old.cat.categories)}
    recode = np.array([index.setdefault(str(v), len(index)) for v in labels] + [-1], dtype=np.int64)
    united = np.concatenate([old.cat.codes.to_numpy(np.int64), recode[codes]])
    return pd.Categorical.from_codes(
        united if order is None else united[order], categories=pd.Index(list(index), dtype=object)
    )
