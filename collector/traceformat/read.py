"""Our trace file: Chrome Trace Event JSON (``.json`` or ``.json.gz``) that Perfetto opens unchanged.

* :func:`write_trace` writes a :class:`~collector.model.Trace` (collector.traceformat.write; stdlib only; atomic).
* :func:`read_trace` reads one of our files back, exactly (int nanoseconds, every field).

The layout is documented in docs/trace-format.md. In short: one Chrome process per rank, one thread per
lane (``tid`` = index into ``Trace.lanes``), every interval and marker an ``X`` event whose ``ts``/``dur``
are microseconds with three decimals relative to the top-level ``baseTimeNanoseconds``, our fields in
``args``, and a top-level ``streamscope`` object with the format version, run metadata and lane table.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from collector.model import (
    FORMAT_VERSION,
    INTERVAL_KIND_DTYPE,
    LANE_KIND_DTYPE,
    MEMORY_KIND_DTYPE,
    IntervalKind,
    Lane,
    LaneKind,
    MarkerKind,
    RunMeta,
    Trace,
    conform_intervals,
    conform_markers,
    conforms,
    empty_markers,
)
from collector.traceformat.events import EventTable, read_events
from collector.traceformat.head import Head
from collector.traceformat.spec import DEFAULT_MAX_INFLATED_BYTES, STREAMSCOPE_KEY, TraceFileError
from collector.traceformat.write import CATEGORIES, MARKER_TID, write_trace

__all__ = ["CATEGORIES", "MARKER_TID", "STREAMSCOPE_KEY", "TraceFileError", "read_trace", "write_trace"]


def read_trace(path: str | os.PathLike[str], *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> Trace:
    """Read one of our trace files. Raises TraceFileError (one line) for anything else or a bad file."""
    table = read_events(path, max_inflated_bytes=max_inflated_bytes)
    if not is_streamscope(table):
        raise TraceFileError(f"{os.fspath(path)}: not a Streamscope trace (no '{STREAMSCOPE_KEY}' metadata object)")
    return from_table(table, os.fspath(path))


def claims(head: Head) -> bool:
    """Our file, from its head: a JSON object whose top-level ``streamscope`` key holds an object (our
    writer puts it first)."""
    return head.keys.get(STREAMSCOPE_KEY) == "{"


def is_streamscope(table: EventTable) -> bool:
    """True when the top-level object carries our metadata object."""
    return isinstance(table.top.get(STREAMSCOPE_KEY), dict)


def from_table(table: EventTable, where: str) -> Trace:
    try:
        return _build(table)
    except TraceFileError as exc:
        raise TraceFileError(f"{where}: {exc}") from None


def _lanes(head: dict[str, Any]) -> tuple[Lane, ...]:
    lanes = head.get("lanes")
    if not isinstance(lanes, list):
        raise TraceFileError(f"'{STREAMSCOPE_KEY}.lanes' is missing or not an array")
    out = []
    for i, ln in enumerate(lanes):
        try:
            lane = Lane(int(ln["rank"]), LaneKind(ln["kind"]), int(ln["ident"]), str(ln["label"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFileError(f"'{STREAMSCOPE_KEY}.lanes[{i}]' is not a valid lane ({exc!s:.60})") from None
        out.append(lane)
    return tuple(out)


def _first(mask: np.ndarray, index: np.ndarray) -> int | None:
    hit = np.flatnonzero(mask)
    return int(index[hit[0]]) if len(hit) else None


def _build(table: EventTable) -> Trace:
    head = table.top[STREAMSCOPE_KEY]
    version = head.get("format_version")
    if version != FORMAT_VERSION:
        raise TraceFileError(
            f"format version {version!r} is not supported (this streamscope reads version {FORMAT_VERSION})"
        )
    base = table.top.get("baseTimeNanoseconds", 0)
    if not isinstance(base, int) or isinstance(base, bool):
        raise TraceFileError("'baseTimeNanoseconds' is not an integer")
    lanes = _lanes(head)
    meta_dict = head.get("meta") or {}
    if not isinstance(meta_dict, dict):
        raise TraceFileError(f"'{STREAMSCOPE_KEY}.meta' is not an object")
    try:
        meta = RunMeta.from_dict(meta_dict)
    except TypeError as exc:
        raise TraceFileError(f"'{STREAMSCOPE_KEY}.meta' is not valid ({exc!s:.60})") from None

    ev = table.events
    is_x = _codes_of(ev["ph"], ["X"])
    kind_col = ev["arg_kind"]
    is_marker = is_x & _codes_of(kind_col, [k.value for k in MarkerKind])
    is_interval = is_x & _codes_of(kind_col, [k.value for k in IntervalKind])
    bad = _first(is_x & ~(is_marker | is_interval), np.arange(len(ev)))
    if bad is not None:
        found = str(kind_col.iloc[bad])
        what = f"unknown args.kind {found!r}" if found else "missing args.kind"
        raise TraceFileError(f"event {bad}: {what}")
    markers = _markers(_Rows(ev, np.flatnonzero(is_marker)), base)
    intervals = _intervals(_Rows(ev, np.flatnonzero(is_interval)), lanes, base)
    return Trace(meta, lanes, intervals, markers)


def _codes_of(col: pd.Series, values: list[str]) -> np.ndarray:
    """Boolean mask: rows of categorical ``col`` whose value is one of ``values`` (no strings made)."""
    cats = col.cat.categories
    wanted = np.flatnonzero(cats.isin(values))
    return np.isin(col.cat.codes.to_numpy(), wanted)


class _Rows:
    """Columns of the event table at rows ``index`` (a slice, so no copy, when they are contiguous)."""

    def __init__(self, events: pd.DataFrame, index: np.ndarray) -> None:
        self.events, self.index = events, index
        contiguous = len(index) and index[-1] - index[0] + 1 == len(index)
        self.sel: slice | np.ndarray = slice(int(index[0]), int(index[-1]) + 1) if contiguous else index

    def __len__(self) -> int:
        return len(self.index)

    def num(self, column: str) -> np.ndarray:
        return self.events[column].to_numpy()[self.sel]

    def cat(self, column: str) -> pd.Categorical:
        col = self.events[column]
        out = pd.Categorical.from_codes(col.cat.codes.to_numpy()[self.sel], categories=col.cat.categories)
        return out.remove_unused_categories()


def _markers(rows: _Rows, base: int) -> pd.DataFrame:
    if not len(rows):
        return empty_markers()
    start = base + rows.num("ts_ns")
    frame = pd.DataFrame(
        {
            "rank": rows.num("pid"),
            "kind": np.asarray(rows.cat("arg_kind"), dtype=object),
            "name": np.asarray(rows.cat("name"), dtype=object),
            "step": rows.num("arg_step"),
            "start_ns": start,
            "end_ns": start + rows.num("dur_ns"),
        }
    )
    return conform_markers(frame)


def _categorical(col: pd.Categorical, dtype: pd.CategoricalDtype, index: np.ndarray, what: str) -> pd.Categorical:
    """``col`` recoded to ``dtype``; a value outside its categories is an error naming the event."""
    known = col.categories.isin(dtype.categories)
    if not known.all():
        pos = np.flatnonzero(~known[col.codes])[0]
        raise TraceFileError(f"event {index[pos]}: unknown {what} {str(col[pos])!r}")
    return col.set_categories(dtype.categories)


def _intervals(rows: _Rows, lanes: tuple[Lane, ...], base: int) -> pd.DataFrame:
    index = rows.index
    lane = rows.num("tid")
    rank_of = np.array([ln.rank for ln in lanes], dtype=np.int32)
    bad = _first((lane < 0) | (lane >= len(lanes)), index)
    if bad is not None:
        raise TraceFileError(f"event {bad}: tid {lane[index == bad][0]} is not a lane of this trace")
    rank = rank_of[lane]
    bad = _first(rows.num("pid") != rank, index)
    if bad is not None:
        raise TraceFileError(f"event {bad}: pid does not match the rank of lane {lane[index == bad][0]}")
    labels = pd.Index(pd.unique(pd.Series([ln.label for ln in lanes], dtype=object)))
    label_code = labels.get_indexer(pd.Index([ln.label for ln in lanes]))
    lane_kind_code = LANE_KIND_DTYPE.categories.get_indexer(pd.Index([LaneKind(ln.kind).value for ln in lanes]))
    ids = rows.num("arg_id")
    start = base + rows.num("ts_ns")
    dur = rows.num("dur_ns")
    columns = {
        "id": np.where(ids < 0, np.arange(len(ids)), ids),
        "rank": rank,
        "lane": lane.astype(np.int32),
        "lane_kind": pd.Categorical.from_codes(lane_kind_code[lane], dtype=LANE_KIND_DTYPE),
        "stream": np.array([ln.ident for ln in lanes], dtype=np.int64)[lane],
        "lane_label": pd.Categorical.from_codes(label_code[lane], categories=labels),
        "kind": _categorical(rows.cat("arg_kind"), INTERVAL_KIND_DTYPE, index, "args.kind"),
        "name": rows.cat("name"),
        "start_ns": start,
        "end_ns": start + dur,
        "dur_ns": dur.copy(),
        "bytes": np.maximum(rows.num("arg_bytes"), 0),
        "memory_kind": _categorical(rows.cat("arg_memory_kind"), MEMORY_KIND_DTYPE, index, "args.memory_kind"),
        "non_blocking": rows.num("arg_non_blocking").copy(),
        "step": rows.num("arg_step").astype(np.int32),
        "source": rows.cat("arg_source"),
        "cause": rows.cat("arg_cause"),
        "launch_id": rows.num("arg_launch_id").copy(),
        "group": rows.cat("arg_group"),
    }
    frame = pd.DataFrame(columns)
    if not conforms(frame):
        frame = conform_intervals(frame)  # pragma: no cover - the frame above is built to the contract
    return frame
