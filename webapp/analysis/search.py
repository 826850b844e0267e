"""Find intervals by name in a run's level-of-detail index, fast enough for ten million intervals.

The pattern is matched against the distinct names (the ``name`` categories, a few thousand at most), then
the matching rows are picked with one table lookup over the per-row name codes. Matches come in time
order (start_ns, then index row) one page at a time: per lane, rows are already sorted by start, so a
page needs one ``searchsorted`` per lane and a sort of at most ``limit`` rows per lane.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from webapp.analysis.lod import RunIndex, window_slice

MAX_PATTERN = 500


class BadPattern(ValueError):
    """The search text is not a valid regular expression (or is too long)."""


def name_table(index: RunIndex, text: str, *, regex: bool = False) -> np.ndarray:
    """Boolean per name category: does the name match? Substring search ignores case; a regular
    expression is Python's ``re`` syntax, searched anywhere in the name. Raises BadPattern."""
    if len(text) > MAX_PATTERN:
        raise BadPattern(f"the search text is longer than {MAX_PATTERN} characters")
    if regex:
        try:
            pattern = re.compile(text)
        except re.error as exc:
            raise BadPattern(f"not a valid regular expression: {exc}") from None
        return np.fromiter((pattern.search(n) is not None for n in index.columns.name_cats), dtype=bool)
    low = text.lower()
    return np.fromiter((low in n.lower() for n in index.columns.name_cats), dtype=bool)


@dataclass(frozen=True)
class Page:
    """One page of matches in time order: index ``rows``; ``total`` matches in the searched window;
    ``names`` the distinct matching names (at most 50)."""

    rows: np.ndarray
    total: int
    names: list[str]


def search(
    index: RunIndex,
    text: str,
    *,
    regex: bool = False,
    lanes: list[int] | None = None,
    t0: int | None = None,
    t1: int | None = None,
    after: tuple[int, int] | None = None,
    before: tuple[int, int] | None = None,
    limit: int = 100,
) -> Page:
    """Matches of ``text`` overlapping [t0, t1) (ns, run clock; whole run by default) on ``lanes``.

    ``after=(start_ns, row)`` returns the first ``limit`` matches that come after that one in time order,
    ``before=(start_ns, row)`` the last ``limit`` that come before it (still in time order); without
    either, the first ``limit``.
    """
    table = name_table(index, text, regex=regex)
    names = [str(n) for n in index.columns.name_cats[table][:50]]
    chosen = range(len(index.lanes)) if lanes is None else lanes
    lo_t = index.origin_ns if t0 is None else t0
    hi_t = index.end_ns + 1 if t1 is None else t1
    if not table.any():
        return Page(np.zeros(0, np.int64), 0, names)
    total = 0
    parts = []
    codes = index.columns.name
    for lane in chosen:
        lo, hi = index.lane_bounds[lane]
        if hi == lo:
            continue
        i0, i1 = window_slice(index.start[lo:hi], index.cummax[lo:hi], lo_t, hi_t)
        a, b = lo + i0, lo + i1
        if b <= a:
            continue
        hits = np.flatnonzero(table[codes[a:b]]) + a
        if lo_t > index.origin_ns:
            hits = hits[index.end[hits] > lo_t] if len(hits) else hits
        total += len(hits)
        if after is not None:
            hits = hits[_cut(index, lo, hi, hits, after, side="after") :][:limit]
        elif before is not None:
            hits = hits[: _cut(index, lo, hi, hits, before, side="before")][-limit:]
        else:
            hits = hits[:limit]
        parts.append(hits)
    rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    order = np.lexsort((rows, index.start[rows]))
    rows = rows[order]
    rows = rows[-limit:] if before is not None and after is None else rows[:limit]
    return Page(rows.astype(np.int64), total, names)


def _cut(index: RunIndex, lo: int, hi: int, hits: np.ndarray, at: tuple[int, int], side: str) -> int:
    """Position in ``hits`` (rows of one lane, sorted) of the first row after ``at`` in (start, row)
    order; for ``side="before"`` the same position ends the rows before it."""
    t, row = at
    starts = index.start[lo:hi]
    left = lo + int(np.searchsorted(starts, t, side="left"))  # first row starting at t
    right = lo + int(np.searchsorted(starts, t, side="right"))  # first row starting after t
    # rows with start == t lie in [left, right): those after `row` come after the anchor
    first_after = max(left, min(row + 1, right))
    first_not_before = max(left, min(row, right))
    cut_row = first_after if side == "after" else first_not_before
    return int(np.searchsorted(hits, cut_row, side="left"))
