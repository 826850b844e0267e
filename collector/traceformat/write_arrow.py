"""Interval events as JSON text built by pyarrow's compute kernels, a chunk of rows per thread.

The same bytes as collector.traceformat.write's row formatter (one ``{"ph":"X",...}`` object per interval,
``,\\n`` after each), at C speed and outside the GIL: integers are cast to decimal strings, string columns
are taken from their categories (each escaped once), optional fields are ``if_else``'d to "" where they hold
their default, and the pieces are joined row-wise. Used when pyarrow is importable; a chunk of rows is
formatted and compressed in the same worker thread (collector.traceformat.deflate).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from collector.traceformat.eventtext import category_texts, heads, json_arg, json_string
from collector.traceformat.grouping import group_numbers

INT_OPTIONALS = (("bytes", 0), ("step", -1), ("launch_id", -1))
"""Integer args written only where they differ from their default (and the string args likewise, below)."""


def interval_text(iv: pd.DataFrame, base: int, gpu_lane: np.ndarray) -> Callable[[int, int], memoryview]:
    """A function of a row range ``[lo, hi)`` of ``iv`` (INTERVAL_COLUMNS) -> its events' UTF-8 text, each
    event followed by ``,\\n``. Column data are taken once here; the returned function is thread-safe.

    Joining a row's pieces costs per piece, so pieces that depend on few values are made once per distinct
    value: the head with the name, the rank and lane before ``ts``, the stream after the args. The args that
    most rows lack (bytes, memory kind, non-blocking, source, cause, group) are joined for the rows that
    have one only."""
    lane = iv["lane"].to_numpy(np.int64)
    on_gpu = gpu_lane[lane]
    kinds = [str(k) for k in iv["kind"].cat.categories]
    kind_codes = iv["kind"].cat.codes.to_numpy(np.int64)
    head_texts = heads(kinds)
    name_codes, name_texts = category_texts(iv["name"], json_string)
    start = iv["start_ns"].to_numpy(np.int64)
    ts_us, ts_frac = np.divmod(start - base, 1000)
    dur_us, dur_frac = np.divmod(iv["end_ns"].to_numpy(np.int64) - start, 1000)
    ints = {
        "ts": ts_us,
        "ts_frac": ts_frac,
        "dur": dur_us,
        "dur_frac": dur_frac,
        "id": iv["id"].to_numpy(np.int64),
        **{name: iv[name].to_numpy(np.int64) for name, _ in INT_OPTIONALS},
    }
    non_blocking = iv["non_blocking"].to_numpy(bool)
    rank, stream = iv["rank"].to_numpy(np.int64), iv["stream"].to_numpy(np.int64)
    where = _by_lane(lane, len(gpu_lane), rank, stream)
    per_head = len(name_texts)
    strings = {
        "head": _distinct_texts(
            (kind_codes + on_gpu * len(kinds)) * per_head + name_codes,
            len(head_texts) * per_head,
            lambda key: head_texts[key // per_head] + name_texts[key % per_head],
        ),
        "where": (where[0], pa.array([f',"pid":{rank[i]},"tid":{lane[i]},"ts":' for i in where[1]], pa.string())),
        "tail": (
            where[0],
            pa.array([f',"stream":{stream[i]}}}}},\n' if on_gpu[i] else "}},\n" for i in where[1]], pa.string()),
        ),
        "kind": (kind_codes, pa.array([f',"args":{{"kind":"{k}","id":' for k in kinds])),
        **{key: _literals(iv[key], json_arg(key)) for key in ("memory_kind", "source", "cause", "group")},
    }
    rare = (ints["bytes"] != 0) | non_blocking
    for key in ("memory_kind", "source", "cause", "group"):
        codes, texts = strings[key]
        rare |= pc.not_equal(texts, "").to_numpy(zero_copy_only=False)[codes]

    def text(lo: int, hi: int) -> memoryview:
        def num(key: str, rows: Any) -> pa.Array:
            return pc.cast(pa.array(ints[key][rows]), pa.string())

        def frac(key: str, rows: Any) -> pa.Array:
            return pc.utf8_lpad(num(key, rows), 3, "0")

        def take(key: str, rows: Any) -> pa.Array:
            codes, labels = strings[key]
            return pc.take(labels, pa.array(codes[rows]))

        def optional(key: str, default: int, rows: Any) -> pa.Array:
            keep = pa.array(ints[key][rows] != default)
            return pc.if_else(keep, pc.binary_join_element_wise(f',"{key}":', num(key, rows), ""), "")

        def args(rows: Any) -> pa.Array:
            pieces: Sequence[Any] = [
                optional("bytes", 0, rows),
                take("memory_kind", rows),
                pc.if_else(pa.array(non_blocking[rows]), ',"non_blocking":true', ""),
                optional("step", -1, rows),
                take("source", rows),
                take("cause", rows),
                optional("launch_id", -1, rows),
                take("group", rows),
            ]
            return pc.binary_join_element_wise(*pieces, "")

        rows = slice(lo, hi)
        common = pc.binary_join_element_wise(optional("step", -1, rows), optional("launch_id", -1, rows), "")
        has_rare = rare[rows]
        if has_rare.any():
            common = pc.replace_with_mask(common, pa.array(has_rare), args(lo + np.flatnonzero(has_rare)))
        pieces: Sequence[Any] = [
            take("head", rows),
            take("where", rows),
            num("ts", rows),
            ".",
            frac("ts_frac", rows),
            ',"dur":',
            num("dur", rows),
            ".",
            frac("dur_frac", rows),
            take("kind", rows),
            num("id", rows),
            common,
            take("tail", rows),
        ]
        return _data(pc.binary_join_element_wise(*pieces, ""))

    return text


def _by_lane(lane: np.ndarray, lanes: int, *values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each row's code, the first row of each code) for rows keyed by their lane and ``values`` (a lane's
    rank and stream, which are the same on all its rows: then the lane is the code)."""
    if not len(lane):
        return lane, lane
    first = np.zeros(lanes, dtype=np.int64)  # a lane without rows: row 0, a text no row uses
    first[lane[::-1]] = np.arange(len(lane) - 1, -1, -1)
    if all((v == v[first[lane]]).all() for v in values):
        return lane, first
    codes = group_numbers(lane, *values).astype(np.int64)
    first = np.empty(int(codes.max()) + 1 if len(codes) else 0, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    return codes, first


def _distinct_texts(key: np.ndarray, space: int, text: Callable[[int], str]) -> tuple[np.ndarray, pa.Array]:
    """(each row's code, ``text(key)`` per key in use as a pyarrow array) for keys in ``[0, space)``."""
    used = np.flatnonzero(np.bincount(key, minlength=space)) if len(key) else np.array([], dtype=np.int64)
    code_of = np.zeros(space, dtype=np.int64)
    code_of[used] = np.arange(len(used))
    return code_of[key], pa.array([text(int(k)) for k in used], pa.string())


def _literals(col: pd.Series, text: Callable[[str], str]) -> tuple[np.ndarray, pa.Array]:
    """A string column as (codes, ``text(value)`` per distinct value as a pyarrow array)."""
    codes, texts = category_texts(col, text)
    return codes, pa.array(texts, pa.string())


def _data(rows: pa.Array) -> memoryview:
    """The concatenated values of a string array: a view of its data buffer (no copy)."""
    if len(rows) == 0:
        return memoryview(b"")
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32, count=len(rows) + 1, offset=rows.offset * 4)
    return memoryview(rows.buffers()[2])[offsets[0] : offsets[-1]]
