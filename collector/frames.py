"""Helpers on interval frames shared by the importers and the recorder (no I/O, no torch)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def concat_keeping_codes(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """``a`` then ``b`` (same columns); categoricals keep their codes, with their categories united, so no
    string is made per row."""
    out = {}
    for c in a.columns:
        x, y = a[c], b[c]
        if isinstance(x.dtype, pd.CategoricalDtype) and isinstance(y.dtype, pd.CategoricalDtype):
            labels = [str(v) for v in x.cat.categories]
            index = {v: i for i, v in enumerate(labels)}
            for v in y.cat.categories:
                index.setdefault(str(v), len(index))
            recode = np.array([index[str(v)] for v in y.cat.categories] + [-1], dtype=np.int64)
            codes = np.concatenate([x.cat.codes.to_numpy(np.int64), recode[y.cat.codes.to_numpy(np.int64)]])
            out[c] = pd.Series(pd.Categorical.from_codes(codes, categories=pd.Index(list(index), dtype=object)))
        else:
            out[c] = pd.Series(np.concatenate([x.to_numpy(), y.to_numpy()]))
    return pd.DataFrame(out)


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
