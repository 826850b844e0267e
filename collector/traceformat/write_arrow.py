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

INT_OPTIONALS = (("bytes", 0), ("step", -1), ("launch_id", -1))
"""Integer args written only where they differ from their default (and the string args likewise, below)."""


def interval_text(iv: pd.DataFrame, base: int, gpu_lane: np.ndarray) -> Callable[[int, int], memoryview]:
    """A function of a row range ``[lo, hi)`` of ``iv`` (INTERVAL_COLUMNS) -> its events' UTF-8 text, each
    event followed by ``,\\n``. Column data are taken once here; the returned function is thread-safe."""
    lane = iv["lane"].to_numpy(np.int64)
    on_gpu = gpu_lane[lane]
    kinds = [str(k) for k in iv["kind"].cat.categories]
    head_codes = iv["kind"].cat.codes.to_numpy(np.int64) + on_gpu * len(kinds)
    start = iv["start_ns"].to_numpy(np.int64)
    ts_us, ts_frac = np.divmod(start - base, 1000)
    dur_us, dur_frac = np.divmod(iv["end_ns"].to_numpy(np.int64) - start, 1000)
    ints = {
        "rank": iv["rank"].to_numpy(np.int64),
        "lane": lane,
        "ts": ts_us,
        "ts_frac": ts_frac,
        "dur": dur_us,
        "dur_frac": dur_frac,
        "id": iv["id"].to_numpy(np.int64),
        "stream": iv["stream"].to_numpy(np.int64),
        **{name: iv[name].to_numpy(np.int64) for name, _ in INT_OPTIONALS},
    }
    non_blocking = iv["non_blocking"].to_numpy(bool)
    strings = {
        "head": (head_codes, pa.array(heads(kinds))),
        "name": _literals(iv["name"], json_string),
        "kind": (iv["kind"].cat.codes.to_numpy(np.int64), pa.array([f'"kind":"{k}","id":' for k in kinds])),
        **{key: _literals(iv[key], json_arg(key)) for key in ("memory_kind", "source", "cause", "group")},
    }

    def text(lo: int, hi: int) -> memoryview:
        def num(key: str) -> pa.Array:
            return pc.cast(pa.array(ints[key][lo:hi]), pa.string())

        def frac(key: str) -> pa.Array:
            return pc.utf8_lpad(num(key), 3, "0")

        def take(key: str) -> pa.Array:
            codes, labels = strings[key]
            return pc.take(labels, pa.array(codes[lo:hi]))

        def optional(key: str, default: int) -> pa.Array:
            keep = pa.array(ints[key][lo:hi] != default)
            return pc.if_else(keep, pc.binary_join_element_wise(f',"{key}":', num(key), ""), "")

        gpu = pa.array(on_gpu[lo:hi])
        pieces: Sequence[Any] = [
            take("head"),
            take("name"),
            ',"pid":',
            num("rank"),
            ',"tid":',
            num("lane"),
            ',"ts":',
            num("ts"),
            ".",
            frac("ts_frac"),
            ',"dur":',
            num("dur"),
            ".",
            frac("dur_frac"),
            ',"args":{',
            take("kind"),
            num("id"),
            optional("bytes", 0),
            take("memory_kind"),
            pc.if_else(pa.array(non_blocking[lo:hi]), ',"non_blocking":true', ""),
            optional("step", -1),
            take("source"),
            take("cause"),
            optional("launch_id", -1),
            take("group"),
            pc.if_else(gpu, pc.binary_join_element_wise(',"stream":', num("stream"), ""), ""),
            "}},\n",
        ]
        rows = pc.binary_join_element_wise(*pieces, "")
        return _data(rows)

    return text


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
