"""Our trace file: Chrome Trace Event JSON (``.json`` or ``.json.gz``) that Perfetto opens unchanged.

* :func:`write_trace` writes a :class:`~collector.model.Trace` (stdlib only; atomic: temp file + rename).
* :func:`read_trace` reads one of our files back, exactly (int nanoseconds, every field).
* :func:`load_trace` reads ours or a torch.profiler trace (via collector.kineto), whichever the file is.

The layout is documented in docs/trace-format.md. In short: one Chrome process per rank, one thread per
lane (``tid`` = index into ``Trace.lanes``), every interval and marker an ``X`` event whose ``ts``/``dur``
are microseconds with three decimals relative to the top-level ``baseTimeNanoseconds``, our fields in
``args``, and a top-level ``streamscope`` object with the format version, run metadata and lane table.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from typing import IO, Any

import numpy as np
import pandas as pd

from collector.chrome import (
    DEFAULT_MAX_INFLATED_BYTES,
    STREAMSCOPE_KEY,
    EventTable,
    TraceFileError,
    read_events,
)
from collector.model import (
    FORMAT_VERSION,
    INTERVAL_COLUMNS,
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
    empty_markers,
)

__all__ = ["TraceFileError", "load_trace", "read_trace", "write_trace", "CATEGORIES", "META_KEY"]

META_KEY = STREAMSCOPE_KEY
"""Top-level key of our metadata object (format_version, meta, lanes)."""

CATEGORIES: dict[str, str] = {
    IntervalKind.KERNEL.value: "kernel",
    IntervalKind.MEMCPY_H2D.value: "gpu_memcpy",
    IntervalKind.MEMCPY_D2H.value: "gpu_memcpy",
    IntervalKind.MEMCPY_D2D.value: "gpu_memcpy",
    IntervalKind.MEMSET.value: "gpu_memset",
    IntervalKind.CPU_OP.value: "cpu_op",
    IntervalKind.LAUNCH.value: "cuda_runtime",
    IntervalKind.SYNC_WAIT.value: "cuda_sync",
    IntervalKind.COLLECTIVE.value: "kernel",
    IntervalKind.ANNOTATION.value: "user_annotation",
    MarkerKind.STEP.value: "step",
    MarkerKind.MARK.value: "mark",
}
"""Chrome ``cat`` of each interval / marker kind (Kineto's names where the meaning is the same).
An annotation on a GPU lane is written as ``gpu_user_annotation``."""

MARKER_TID = 999_999_999
"""``tid`` of the per-rank thread that holds step and mark events."""

_LANE_ORDER = {k.value: i for i, k in enumerate(LaneKind)}
_CHUNK = 100_000


# ------------------------------------------------------------------------------------------ write


def write_trace(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` to ``path`` (gzip when it ends in ``.gz``), atomically: never a half-written file.

    Raises ValueError for a trace that cannot be written faithfully (an interval that ends before it
    starts, or one on a lane that does not exist).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.endswith(".gz"):
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) as gz:
                    _write(trace, gz)
            else:
                _write(trace, raw)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write(trace: Trace, out: IO[bytes] | gzip.GzipFile) -> None:
    iv, mk = trace.intervals, trace.markers
    if len(iv):
        if (iv["end_ns"].to_numpy() < iv["start_ns"].to_numpy()).any():
            raise ValueError("an interval ends before it starts; cannot write a negative duration")
        lane = iv["lane"].to_numpy()
        if lane.min() < 0 or lane.max() >= len(trace.lanes):
            raise ValueError("an interval refers to a lane that does not exist")
    if len(mk) and (mk["end_ns"].to_numpy() < mk["start_ns"].to_numpy()).any():
        raise ValueError("a marker ends before it starts")
    starts = [int(f["start_ns"].min()) for f in (iv, mk) if len(f)]
    base = min(starts) if starts else 0
    head = {
        META_KEY: {
            "format_version": FORMAT_VERSION,
            "meta": {**trace.meta.to_dict(), "format_version": FORMAT_VERSION},
            "lanes": [
                {"rank": ln.rank, "kind": LaneKind(ln.kind).value, "ident": ln.ident, "label": ln.label}
                for ln in trace.lanes
            ],
        },
        "baseTimeNanoseconds": base,
        "displayTimeUnit": "ns",
        "traceName": trace.meta.workload or "streamscope",
    }
    text = json.dumps(head, ensure_ascii=False, default=str)
    out.write(text[:-1].encode() + b', "traceEvents": [\n')
    first = True
    for block in _event_blocks(trace, base):
        if block:
            out.write(((",\n" if not first else "") + ",\n".join(block)).encode())
            first = False
    out.write(b"\n]}\n")


def _event_blocks(trace: Trace, base: int) -> Iterator[list[str]]:
    yield _metadata_events(trace)
    yield from _marker_events(trace.markers, base)
    iv = trace.intervals
    gpu_lane = np.array([LaneKind(ln.kind).is_gpu for ln in trace.lanes], dtype=bool)
    for lo in range(0, len(iv), _CHUNK):
        yield _interval_events(iv.iloc[lo : lo + _CHUNK], base, gpu_lane)


def _metadata_events(trace: Trace) -> list[str]:
    def meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> str:
        return json.dumps({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args}, ensure_ascii=False)

    events = []
    ranks = sorted({ln.rank for ln in trace.lanes} | set(trace.markers["rank"].tolist()))
    for rank in ranks:
        events.append(meta("process_name", rank, 0, {"name": f"rank {rank}"}))
        events.append(meta("process_sort_index", rank, 0, {"sort_index": rank}))
        events.append(meta("thread_name", rank, MARKER_TID, {"name": "steps & marks"}))
        events.append(meta("thread_sort_index", rank, MARKER_TID, {"sort_index": -1}))
    for tid, ln in enumerate(trace.lanes):
        order = _LANE_ORDER[LaneKind(ln.kind).value] * 1_000_000 + tid
        events.append(meta("thread_name", ln.rank, tid, {"name": ln.label}))
        events.append(meta("thread_sort_index", ln.rank, tid, {"sort_index": order}))
    return events


def _us(ns: np.ndarray) -> list[str]:
    """Non-negative nanoseconds as exact microsecond decimals ("12.345")."""
    return [f"{v // 1000}.{v % 1000:03d}" for v in ns.tolist()]


def _json_strings(col: pd.Series) -> list[str]:
    """A string column as JSON string literals, escaping each distinct value once."""
    cat = col.astype("category") if not isinstance(col.dtype, pd.CategoricalDtype) else col
    lits = [json.dumps(str(c), ensure_ascii=False) for c in cat.cat.categories]
    return [lits[c] for c in cat.cat.codes.tolist()]


def _marker_events(mk: pd.DataFrame, base: int) -> Iterator[list[str]]:
    if not len(mk):
        return
    start = mk["start_ns"].to_numpy(np.int64)
    rows = zip(
        mk["kind"].astype(str).tolist(),
        _json_strings(mk["name"].astype(str)),
        mk["rank"].tolist(),
        _us(start - base),
        _us(mk["end_ns"].to_numpy(np.int64) - start),
        mk["step"].tolist(),
        strict=True,
    )
    yield [
        f'{{"ph":"X","cat":"{CATEGORIES[k]}","name":{n},"pid":{r},"tid":{MARKER_TID},"ts":{t},"dur":{d},'
        f'"args":{{"kind":"{k}","step":{s}}}}}'
        for k, n, r, t, d, s in rows
    ]


def _optional(values: list[Any], default: Any, key: str) -> list[str]:
    return ["" if v == default else f',"{key}":{v}' for v in values]


def _optional_strings(col: pd.Series, key: str) -> list[str]:
    """``,"key":"value"`` for each row of a string column ('' where the value is ''), escaped once per value."""
    cat = col.astype("category") if not isinstance(col.dtype, pd.CategoricalDtype) else col
    lits = [f',"{key}":{json.dumps(str(c), ensure_ascii=False)}' if str(c) else "" for c in cat.cat.categories]
    return [lits[c] for c in cat.cat.codes.tolist()]


def _interval_events(iv: pd.DataFrame, base: int, gpu_lane: np.ndarray) -> list[str]:
    lane = iv["lane"].to_numpy(np.int64)
    on_gpu = gpu_lane[lane]
    kind_codes = iv["kind"].cat.codes.to_numpy()
    kinds = [str(k) for k in iv["kind"].cat.categories]
    # one head string per (kind, lane on GPU): '{"ph":"X","cat":"kernel","name":'
    heads = [
        '{"ph":"X","cat":"%s","name":' % ("gpu_user_annotation" if g and k == "annotation" else CATEGORIES[k])
        for g in (False, True)
        for k in kinds
    ]
    head = [heads[h] for h in (kind_codes + on_gpu * len(kinds)).tolist()]
    kind = [kinds[k] for k in kind_codes.tolist()]
    stream = ["" if not g else f',"stream":{s}' for g, s in zip(on_gpu.tolist(), iv["stream"].tolist(), strict=True)]
    extra = zip(
        _optional(iv["bytes"].tolist(), 0, "bytes"),
        _optional_strings(iv["memory_kind"], "memory_kind"),
        ["" if not v else ',"non_blocking":true' for v in iv["non_blocking"].tolist()],
        _optional(iv["step"].tolist(), -1, "step"),
        _optional_strings(iv["source"], "source"),
        _optional_strings(iv["cause"], "cause"),
        _optional(iv["launch_id"].tolist(), -1, "launch_id"),
        stream,
        strict=True,
    )
    start = iv["start_ns"].to_numpy(np.int64)
    ts_us, ts_frac = np.divmod(start - base, 1000)
    dur_us, dur_frac = np.divmod(iv["end_ns"].to_numpy(np.int64) - start, 1000)
    rows = zip(
        head,
        _json_strings(iv["name"]),
        iv["rank"].tolist(),
        lane.tolist(),
        ts_us.tolist(),
        ts_frac.tolist(),
        dur_us.tolist(),
        dur_frac.tolist(),
        kind,
        iv["id"].tolist(),
        ("".join(e) for e in extra),
        strict=True,
    )
    return [
        f'{h}{n},"pid":{r},"tid":{ln},"ts":{t}.{tf:03d},"dur":{d}.{df:03d},"args":{{"kind":"{k}","id":{i}{x}}}}}'
        for h, n, r, ln, t, tf, d, df, k, i, x in rows
    ]


# ------------------------------------------------------------------------------------------- read


def read_trace(path: str | os.PathLike[str], *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> Trace:
    """Read one of our trace files. Raises TraceFileError (one line) for anything else or a bad file."""
    table = read_events(path, max_inflated_bytes=max_inflated_bytes)
    if not is_streamscope(table):
        raise TraceFileError(f"{os.fspath(path)}: not a Streamscope trace (no '{META_KEY}' metadata object)")
    return _from_table(table, os.fspath(path))


def load_trace(path: str | os.PathLike[str], *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> Trace:
    """Read our trace file, or import a torch.profiler (Kineto) Chrome trace, whichever ``path`` holds."""
    table = read_events(path, max_inflated_bytes=max_inflated_bytes)
    if is_streamscope(table):
        return _from_table(table, os.fspath(path))
    try:
        from collector.kineto import trace_from_kineto
    except ImportError:
        raise TraceFileError(
            f"{os.fspath(path)}: not a Streamscope trace and torch.profiler import is unavailable"
        ) from None
    try:
        return trace_from_kineto(table)
    except TraceFileError as exc:
        text = str(exc)
        raise TraceFileError(text if text.startswith(os.fspath(path)) else f"{os.fspath(path)}: {text}") from None


def is_streamscope(table: EventTable) -> bool:
    """True when the top-level object carries our metadata object."""
    return isinstance(table.top.get(META_KEY), dict)


def _from_table(table: EventTable, where: str) -> Trace:
    try:
        return _build(table)
    except TraceFileError as exc:
        raise TraceFileError(f"{where}: {exc}") from None


def _lanes(head: dict[str, Any]) -> tuple[Lane, ...]:
    lanes = head.get("lanes")
    if not isinstance(lanes, list):
        raise TraceFileError(f"'{META_KEY}.lanes' is missing or not an array")
    out = []
    for i, ln in enumerate(lanes):
        try:
            lane = Lane(int(ln["rank"]), LaneKind(ln["kind"]), int(ln["ident"]), str(ln["label"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceFileError(f"'{META_KEY}.lanes[{i}]' is not a valid lane ({exc!s:.60})") from None
        out.append(lane)
    return tuple(out)


def _first(mask: np.ndarray, index: np.ndarray) -> int | None:
    hit = np.flatnonzero(mask)
    return int(index[hit[0]]) if len(hit) else None


def _build(table: EventTable) -> Trace:
    head = table.top[META_KEY]
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
        raise TraceFileError(f"'{META_KEY}.meta' is not an object")
    try:
        meta = RunMeta.from_dict(meta_dict)
    except TypeError as exc:
        raise TraceFileError(f"'{META_KEY}.meta' is not valid ({exc!s:.60})") from None

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
    }
    frame = pd.DataFrame(columns)
    if not _conforms(frame):
        frame = conform_intervals(frame)  # pragma: no cover - the frame above is built to the contract
    return frame


def _conforms(frame: pd.DataFrame) -> bool:
    """True when ``frame`` already has INTERVAL_COLUMNS' names, order and dtypes (so no copy is needed)."""
    if list(frame.columns) != list(INTERVAL_COLUMNS):
        return False
    for name, (dtype, _) in INTERVAL_COLUMNS.items():
        have = frame[name].dtype
        if isinstance(dtype, pd.CategoricalDtype) or dtype == "category":
            if not isinstance(have, pd.CategoricalDtype) or (dtype != "category" and have != dtype):
                return False
        elif str(have) != str(dtype):
            return False
    return True
