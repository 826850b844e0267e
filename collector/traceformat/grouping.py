"""Rows keyed by a tuple of integer (or hashable) columns, numbered by group.

:func:`group_numbers` is pandas' ``groupby(keys).ngroup()`` without building a frame: used for lanes
(process or device, thread or stream) by the importer and the trace writer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def group_numbers(*keys: np.ndarray) -> np.ndarray:
    """Each row's group number (int32) in sorted order of its key tuple, as pandas' ``groupby(...).ngroup()``.

    Each key is coded in order (a key whose values span a range not much wider than the rows is its own code
    less its minimum; others are hashed by ``pd.factorize``) and folded into the codes so far, which are
    ranked dense again (counting, not sorting) whenever their range would outgrow the rows. Lane keys (a
    process or device id, a thread or stream id) take no hashing at all.
    """
    rows = len(keys[0]) if keys else 0
    limit = 4 * rows + 4096
    combined, span = np.zeros(rows, dtype=np.int64), 1
    for key in keys:
        codes, width = _ordered_codes(np.asarray(key), limit)
        if span * width > limit:
            combined, span = _dense_rank(combined, span)
        if span * width > limit:  # both wide: hash the folded codes (below rows squared, so no overflow)
            combined, uniques = pd.factorize(combined * width + codes, sort=True)
            span = max(len(uniques), 1)
        else:
            combined, span = combined * width + codes, span * width
    return _dense_rank(combined, span)[0].astype(np.int32)


def _ordered_codes(key: np.ndarray, limit: int) -> tuple[np.ndarray, int]:
    """Codes in the order of ``key``'s values and how many there can be."""
    if key.dtype == bool:
        return key.astype(np.int64), 2
    if len(key) and key.dtype.kind in "iu":
        low, high = int(key.min()), int(key.max())
        if high - low < limit and high < 2**63:
            return key.astype(np.int64) - low, high - low + 1
    codes, uniques = pd.factorize(key, sort=True)
    return codes.astype(np.int64), max(len(uniques), 1)


def _dense_rank(codes: np.ndarray, span: int) -> tuple[np.ndarray, int]:
    """Codes in ``[0, span)`` renumbered ``0..k-1`` in the same order, and k."""
    present = np.bincount(codes, minlength=span) > 0
    rank = np.cumsum(present) - 1
    return rank[codes], int(present.sum())
