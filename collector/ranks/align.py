"""Clock alignment of ranks from the data: synchronous collectives end together on every rank.

Each rank's trace is on its own host clock (NTP-grade across hosts: hundreds of microseconds apart). A
collective (all_reduce, barrier, ...) is synchronous: ranks enter it at different times but leave it
together, so the ends of one collective on all ranks mark one instant. :func:`matched_collectives` pairs
the collectives of the ranks: the k-th collective of one name in one process group on a rank is the k-th of
that name and group on every other rank of the group (the ranks that ran any collective in it), counted
from each rank's first barrier when every rank recorded one (the first anchor; a rank that started
recording earlier may hold collectives the others missed). :func:`clock_offsets`
takes, per rank, the median over the matched collectives of ``end on the reference rank - end on the
rank`` as its offset. Ranks on one host share its clock and one offset. The offset is kept inside the
bounds causality sets when they agree: no rank leaves a collective before the last one entered it, so
``start_ref - end_r <= offset <= end_ref - start_r`` for every collective. The residual error
(``residual_ns``) is the median absolute deviation of the end differences from the offset;
``max_residual_ns`` the largest deviation.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from collector.model import IntervalKind

MATCHED_COLUMNS = ("seq", "name", "group", "rank", "start_ns", "end_ns", "dur_ns", "row")
"""Columns of :func:`matched_collectives`: ``seq`` (collective instance, same on every rank), ``name``
(its name without the backend prefix), ``group`` (its process group, '' if unknown), ``rank``,
``start_ns``/``end_ns``/``dur_ns`` (ns on that rank's clock), ``row`` (position of the interval in the
input frame)."""

OFFSET_COLUMNS = ("rank", "offset_ns", "residual_ns", "max_residual_ns", "anchors")
"""Columns of :func:`clock_offsets`: ``offset_ns`` to add to the rank's times, ``residual_ns`` (median
absolute deviation of collective ends after alignment, ns), ``max_residual_ns`` and ``anchors`` (how many
collectives were used)."""


def _base_name(names: pd.Series) -> np.ndarray:
    """``gloo:all_reduce`` -> ``all_reduce``; NCCL kernel names stay whole (one per collective type)."""
    cat = names.astype("category")
    base = np.array([str(c).split(":", 1)[-1] for c in cat.cat.categories] + [""], dtype=object)
    return base[cat.cat.codes.to_numpy()]


def matched_collectives(intervals: pd.DataFrame) -> pd.DataFrame:
    """One row per (collective instance seen on every rank of its group, rank); see MATCHED_COLUMNS. Sorted by
    seq, rank. ``intervals`` needs the ``rank``, ``kind``, ``name``, ``group``, ``start_ns`` and ``end_ns``
    columns of INTERVAL_COLUMNS."""
    rows = np.flatnonzero((intervals["kind"] == IntervalKind.COLLECTIVE.value).to_numpy(bool))  # by code
    empty = pd.DataFrame({c: pd.Series(dtype="int64") for c in MATCHED_COLUMNS}).astype(
        {"name": object, "group": object}
    )
    if not len(rows):
        return empty
    sub = intervals.iloc[rows]
    frame = pd.DataFrame(
        {
            "name": _base_name(sub["name"]),
            "group": sub["group"].astype(str).to_numpy(dtype=object),
            "rank": sub["rank"].to_numpy(np.int64),
            "start_ns": sub["start_ns"].to_numpy(np.int64),
            "end_ns": sub["end_ns"].to_numpy(np.int64),
            "row": rows.astype(np.int64),
        }
    ).sort_values(["rank", "start_ns"], kind="stable")
    ranks = np.unique(frame["rank"].to_numpy())
    barrier = frame["name"].str.contains("barrier", case=False).to_numpy()
    first_barrier = frame[barrier].groupby("rank")["start_ns"].min()
    if len(ranks) > 1 and len(first_barrier) == len(ranks):
        frame = frame[frame["start_ns"].to_numpy() >= first_barrier.reindex(frame["rank"]).to_numpy()]
    frame["k"] = frame.groupby(["rank", "group", "name"]).cumcount()
    seen = frame.groupby(["group", "name", "k"])["rank"].transform("nunique").to_numpy()
    members = frame.groupby("group")["rank"].transform("nunique").to_numpy()
    frame = frame[seen == members].copy()
    if frame.empty:
        return empty
    # an instance is ordered by its earliest end over ranks (ends agree; starts do not)
    order = frame.groupby(["group", "name", "k"])["end_ns"].transform("min")
    key = pd.MultiIndex.from_arrays([order, frame["group"], frame["name"], frame["k"]])
    frame["seq"] = pd.factorize(key, sort=True)[0]
    frame["dur_ns"] = frame["end_ns"] - frame["start_ns"]
    out = frame.sort_values(["seq", "rank"], kind="stable").reset_index(drop=True)
    return out[list(MATCHED_COLUMNS)].astype({"seq": np.int64})


def clock_offsets(
    matched: pd.DataFrame, ranks: list[int], hosts: dict[int, str] | None = None, reference: int | None = None
) -> pd.DataFrame:
    """Per rank: the offset that lines its collective ends up with the reference rank's (the lowest rank by
    default; offset 0) and the residual error. Ranks on one host share its clock, so they get one offset,
    estimated from all of them (the reference host's ranks: 0); a rank with an unknown host ('') is a clock of
    its own. Ranks without matched collectives get offset 0 and ``anchors`` 0. See OFFSET_COLUMNS."""
    ref = min(ranks) if reference is None else reference
    hosts = hosts or {}
    clock = {r: hosts.get(r) or f"rank {r}" for r in ranks}
    ends = matched.pivot_table(index="seq", columns="rank", values="end_ns", aggfunc="first")
    starts = matched.pivot_table(index="seq", columns="rank", values="start_ns", aggfunc="first")
    offset_of: dict[str, int] = {clock[ref]: 0}
    for group in dict.fromkeys(clock.values()):
        members = [r for r in ranks if clock[r] == group and r in ends.columns]
        if group in offset_of or ref not in ends.columns or not members:
            continue
        diff = np.concatenate([(ends[ref] - ends[r]).dropna().to_numpy(np.int64) for r in members])
        lo = max(int((starts[ref] - ends[r]).max()) for r in members)
        hi = min(int((ends[ref] - starts[r]).min()) for r in members)
        offset = int(np.median(diff)) if len(diff) else 0
        if lo <= hi:  # no rank leaves a collective before every rank has entered it
            offset = min(max(offset, lo), hi)
        offset_of[group] = offset
    rows = []
    for r in ranks:
        offset = offset_of.get(clock[r], 0)
        if r not in ends.columns or ref not in ends.columns:
            rows.append((r, offset, 0, 0, 0))
            continue
        dev = np.abs((ends[ref] - ends[r]).dropna().to_numpy(np.int64) - offset)
        rows.append((r, offset, int(np.median(dev)) if len(dev) else 0, int(dev.max()) if len(dev) else 0, len(dev)))
    return pd.DataFrame(rows, columns=list(OFFSET_COLUMNS)).astype(np.int64)
