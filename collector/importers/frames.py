"""Helpers on interval frames shared by the importers, the recorder and step finding (no I/O, no torch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import lookup_first
from collector.model import NO_LAUNCH


def concat_keeping_codes(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """``a`` then ``b`` (same columns); categoricals keep their codes, with their categories united, so no
    string is made per row."""
    out: dict[str, Any] = {}
    for c in a.columns:
        x, y = a[c], b[c]
        if isinstance(x.dtype, pd.CategoricalDtype) and isinstance(y.dtype, pd.CategoricalDtype):
            labels = [str(v) for v in x.cat.categories]
            index = {v: i for i, v in enumerate(labels)}
            for v in y.cat.categories:
                index.setdefault(str(v), len(index))
            recode = np.array([index[str(v)] for v in y.cat.categories] + [-1], dtype=np.int64)
            codes = np.concatenate([x.cat.codes.to_numpy(np.int64), recode[y.cat.codes.to_numpy(np.int64)]])
            out[c] = pd.Categorical.from_codes(codes, categories=pd.Index(list(index), dtype=object))
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
