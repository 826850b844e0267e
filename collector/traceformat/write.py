"""Write a :class:`~collector.model.Trace` as our Chrome-trace file (see docs/trace-format.md).

Interval events are built a chunk of rows at a time, each distinct string escaped once: by pyarrow's
compute kernels in worker threads where pyarrow is installed (collector.traceformat.write_arrow), else by
Python string formatting of per-column lists. Chunks are compressed in those threads into one gzip member
(collector.traceformat.deflate), written to a temp file in the destination folder and renamed into place.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from collector.model import FORMAT_VERSION, LANE_KIND_CODE, Lane, LaneKind, Trace
from collector.traceformat.deflate import Sink, workers
from collector.traceformat.eventtext import CATEGORIES, category_texts, heads, json_arg, json_string
from collector.traceformat.spec import STREAMSCOPE_KEY

"""Top-level key of our metadata object (format_version, meta, lanes)."""

OUTPUT_SUFFIXES = (".json", ".json.gz")
"""The names of the files :func:`write_trace` writes: plain JSON, or gzip for ``.gz``."""

MARKER_TID = 999_999_999
"""``tid`` of the per-rank thread that holds step and mark events."""

_CHUNK = 25_000
"""Most rows per chunk of interval events: small enough that the last wave of chunks keeps the threads busy."""

_MIN_CHUNK = 4_000
"""Fewest rows per chunk: a short recording's few thousand rows are still split among the threads, where one
chunk would be formatted and compressed in one of them (the stop of a short script waits for it)."""


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
            sink = Sink(raw, gzip=path.endswith(".gz"))
            _write(trace, sink)
            sink.close()
        os.chmod(tmp, 0o644)  # mkstemp made it private; a trace file is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write(trace: Trace, out: Sink) -> None:
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
        STREAMSCOPE_KEY: {
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
    small = _metadata_events(trace) + [e for block in _marker_events(trace.markers, base) for e in block]
    out.write((text[:-1] + ', "traceEvents": [\n' + ",\n".join(small)).encode())
    if len(iv):
        make, threads = _interval_chunks(iv, base, trace.lanes)
        rows = _chunk_rows(len(iv), threads or workers())
        count = -(-len(iv) // rows)

        def chunk(i: int) -> Any:
            data = make(i * rows, min((i + 1) * rows, len(iv)))
            return data[:-2] if i == count - 1 else data  # no ",\n" after the last event

        if small:
            out.write(b",\n")
        out.write_chunks(chunk, count, threads)
    out.write(b"\n]}\n")


def _chunk_rows(rows: int, threads: int) -> int:
    """Rows per chunk for ``rows`` interval events made by ``threads`` threads: an equal share for each
    thread, within [:data:`_MIN_CHUNK`, :data:`_CHUNK`]."""
    return min(_CHUNK, max(_MIN_CHUNK, -(-rows // max(threads, 1))))


def _interval_chunks(iv: pd.DataFrame, base: int, lanes: Sequence[Lane]) -> tuple[Callable[[int, int], Any], int]:
    """(a function of a row range -> its interval events' text, each event followed by ``,\\n``; how many
    threads may call it at once): pyarrow's compute kernels where pyarrow is installed (0: as many as
    there are CPUs), else Python's string formatting, which reads the DataFrame (1: one thread)."""
    gpu_lane = np.array([LaneKind(ln.kind).is_gpu for ln in lanes], dtype=bool)
    try:
        from collector.traceformat.write_arrow import interval_text
    except ImportError:

        def formatted(lo: int, hi: int) -> bytes:
            return "".join(e + ",\n" for e in _interval_events(iv.iloc[lo:hi], base, gpu_lane)).encode()

        return formatted, 1
    return interval_text(iv, base, gpu_lane), 0


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
        order = LANE_KIND_CODE[LaneKind(ln.kind)] * 1_000_000 + tid
        events.append(meta("thread_name", ln.rank, tid, {"name": ln.label}))
        events.append(meta("thread_sort_index", ln.rank, tid, {"sort_index": order}))
    return events


def _us(ns: np.ndarray) -> list[str]:
    """Non-negative nanoseconds as exact microsecond decimals ("12.345")."""
    return [f"{v // 1000}.{v % 1000:03d}" for v in ns.tolist()]


def _per_value(col: pd.Series, text: Callable[[str], str]) -> list[str]:
    """``text(value)`` for each row of a string column, computed once per distinct value."""
    codes, texts = category_texts(col, text)
    return [texts[c] for c in codes.tolist()]


def _marker_events(mk: pd.DataFrame, base: int) -> Iterator[list[str]]:
    if not len(mk):
        return
    start = mk["start_ns"].to_numpy(np.int64)
    rows = zip(
        mk["kind"].astype(str).tolist(),
        _per_value(mk["name"].astype(str), json_string),
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


def _interval_events(iv: pd.DataFrame, base: int, gpu_lane: np.ndarray) -> list[str]:
    lane = iv["lane"].to_numpy(np.int64)
    on_gpu = gpu_lane[lane]
    kind_codes = iv["kind"].cat.codes.to_numpy()
    kinds = [str(k) for k in iv["kind"].cat.categories]
    head_texts = heads(kinds)
    head = [head_texts[h] for h in (kind_codes + on_gpu * len(kinds)).tolist()]
    kind = [kinds[k] for k in kind_codes.tolist()]
    stream = ["" if not g else f',"stream":{s}' for g, s in zip(on_gpu.tolist(), iv["stream"].tolist(), strict=True)]
    extra = zip(
        _optional(iv["bytes"].tolist(), 0, "bytes"),
        _per_value(iv["memory_kind"], json_arg("memory_kind")),
        ["" if not v else ',"non_blocking":true' for v in iv["non_blocking"].tolist()],
        _optional(iv["step"].tolist(), -1, "step"),
        _per_value(iv["source"], json_arg("source")),
        _per_value(iv["cause"], json_arg("cause")),
        _optional(iv["launch_id"].tolist(), -1, "launch_id"),
        _per_value(iv["group"], json_arg("group")),
        stream,
        strict=True,
    )
    start = iv["start_ns"].to_numpy(np.int64)
    ts_us, ts_frac = np.divmod(start - base, 1000)
    dur_us, dur_frac = np.divmod(iv["end_ns"].to_numpy(np.int64) - start, 1000)
    rows = zip(
        head,
        _per_value(iv["name"], json_string),
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
