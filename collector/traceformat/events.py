"""Read any Chrome Trace Event JSON file (ours or torch.profiler's) into a columnar event table.

This is the one parser under both our own format (collector.traceformat.read) and the torch.profiler importer
(collector.importers.kineto). It returns the top-level object (everything but ``traceEvents``) and an
:class:`EventTable`: one row per event, in file order, with the ``args`` fields we use pulled into typed
columns.

Event table columns (EVENT_COLUMNS; missing values are -1, "" or False):

==================== ========= ==============================================================
ph, cat, name        category  Chrome phase, category, event name
pid, tid             int64     Chrome process / thread (non-integer ids map to negative ints
                               -2, -3, ..., see EventTable.id_names; -1 = missing)
ts_ns, dur_ns        int64     ``ts`` / ``dur`` (microseconds in the file) as nanoseconds
flow_id              int64     ``id`` of flow events (``ph`` s/f), -1 otherwise
arg_name             category  ``args.name`` (process_name / thread_name metadata)
arg_stream           int64     ``args.stream`` (Kineto GPU events)
arg_device           int64     ``args.device``
arg_correlation      int64     ``args.correlation`` (Kineto launch <-> GPU link)
arg_external_id      int64     ``args["External id"]``
arg_bytes            int64     ``args.bytes``
arg_python_id        int64     ``args["Python id"]`` (python_function events)
arg_python_parent_id int64     ``args["Python parent id"]``
arg_kind             category  ``args.kind`` (ours: IntervalKind / MarkerKind)
arg_memory_kind      category  ``args.memory_kind`` (ours)
arg_non_blocking     bool      ``args.non_blocking`` (ours)
arg_step             int64     ``args.step`` (ours)
arg_source           category  ``args.source`` (ours: user file:line)
arg_cause            category  ``args.cause`` (ours: sync cause)
arg_launch_id        int64     ``args.launch_id`` (ours)
arg_id               int64     ``args.id`` (ours: interval id)
arg_group            category  ``args.group`` (ours: process group of a collective); in torch.profiler
                               traces the group of ``Process Group Name`` / ``Description``
==================== ========= ==============================================================

The ``arg_kind`` ... ``arg_id`` columns (our own fields) are read only from our files, recognised by the
top-level ``streamscope`` object; in other traces they keep their defaults, whatever ``args`` holds (except
``arg_group``, see above). In torch.profiler traces, a collective's ``arg_bytes`` is its larger message
(``In msg nelems`` / ``Out msg nelems`` times the size of ``dtype``). Likewise
``flow_id``, ``arg_device``, ``arg_correlation``, ``arg_external_id`` and ``arg_python_*`` (Kineto's) are read
only from other traces: our files never hold them.

Every event is checked: it must be an object with a ``ph``; ``X`` events need numeric ``ts`` and ``dur``
with ``dur >= 0``; typed fields must have their JSON type. Anything else raises :class:`TraceFileError`
with one line naming the problem and the event index. The fast path uses msgspec (typed decode in
batches, garbage collector paused); the stdlib ``json`` module gives the same table (the
reference path tests hold it to, and the path taken where msgspec is not installed).
"""

from __future__ import annotations

import mmap
import os
import zlib
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from collector.traceformat import parse_json
from collector.traceformat.spec import DEFAULT_MAX_INFLATED_BYTES, GZIP_MAGIC, TraceFileError, corrupt_gzip

EVENT_COLUMNS: dict[str, str] = {
    "ph": "category",
    "cat": "category",
    "name": "category",
    "pid": "int64",
    "tid": "int64",
    "ts_ns": "int64",
    "dur_ns": "int64",
    "flow_id": "int64",
    "arg_name": "category",
    "arg_stream": "int64",
    "arg_device": "int64",
    "arg_correlation": "int64",
    "arg_external_id": "int64",
    "arg_bytes": "int64",
    "arg_python_id": "int64",
    "arg_python_parent_id": "int64",
    "arg_kind": "category",
    "arg_memory_kind": "category",
    "arg_non_blocking": "bool",
    "arg_step": "int64",
    "arg_source": "category",
    "arg_cause": "category",
    "arg_launch_id": "int64",
    "arg_id": "int64",
    "arg_group": "category",
}


@dataclass
class EventTable:
    """A parsed Chrome trace: ``top`` is the top-level object without ``traceEvents``."""

    top: dict[str, Any]
    events: pd.DataFrame
    id_names: dict[int, str] = field(default_factory=dict)


def read_events(
    path: str | os.PathLike[str],
    *,
    max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES,
    fast: bool = True,
) -> EventTable:
    """Parse a ``.json`` or ``.json.gz`` Chrome trace. Raises TraceFileError with a one-line message.

    The msgspec path reads (the stdlib path where msgspec is not installed, as on a GPU host with torch
    alone); ``fast=False`` takes the stdlib ``json`` reference path, the oracle tests hold the fast one to.
    Gzip is recognised by its magic bytes and inflated in chunks, refused once it passes
    ``max_inflated_bytes``.
    """
    parse = parse_json.parse_stdlib
    if fast:
        try:  # imported here: a collector with torch alone (no msgspec) reads with the standard library
            from collector.traceformat import parse_msgspec
        except ImportError:
            pass
        else:
            parse = parse_msgspec.parse_fast
    try:
        top, columns, id_names = parse(read_bytes(os.fspath(path), max_inflated_bytes))
    except TraceFileError as exc:
        raise TraceFileError(f"{os.fspath(path)}: {exc}") from None
    return EventTable(top, pd.DataFrame(columns), id_names)


def read_bytes(path: str, max_inflated_bytes: int) -> bytearray | mmap.mmap:
    """The file's JSON bytes, writable (the fast path brackets batches in place).

    A plain file is memory-mapped copy-on-write (no copy is made; the file itself never changes); a gzip
    file is inflated in chunks and refused once it passes ``max_inflated_bytes``.
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
            f.seek(0)
            if magic == GZIP_MAGIC:
                return _inflate(f, max_inflated_bytes)
            if os.fstat(f.fileno()).st_size == 0:
                return bytearray(f.read())  # empty, or a pipe: no size to map
            try:
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
            except (OSError, ValueError):  # a file system that cannot map files
                return bytearray(f.read())
    except OSError as exc:
        raise TraceFileError(f"cannot read the file ({exc.strerror or exc})") from None


_WHITESPACE = b" \t\r\n"


def _inflate(f: Any, limit: int) -> bytearray:
    """The inflated bytes, refused past ``limit``. A piece (up to ~17 MB) that is all JSON whitespace and
    follows whitespace is dropped, so a trace padded with gigabytes of blanks costs no memory (``limit``
    still counts every inflated byte)."""
    out = _presized(f, limit)
    size = inflated = 0
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        while chunk := f.read(1 << 14):  # deflate inflates at most ~1032x: 17 MB per call, no cap needed
            while chunk:
                piece = inflater.decompress(chunk)
                inflated += len(piece)
                if inflated > limit:
                    raise TraceFileError(
                        f"gzip inflates past the limit of {limit:,} bytes (max_inflated_bytes); "
                        "refusing a likely gzip bomb"
                    )
                blank = size > 0 and out[size - 1] in _WHITESPACE and not piece.translate(None, _WHITESPACE)
                if not blank:
                    out[size : size + len(piece)] = piece  # in place while it fits, else grows
                    size += len(piece)
                chunk = b""
                if inflater.eof and inflater.unused_data.strip(b"\0"):
                    chunk = inflater.unused_data  # another gzip member follows
                    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except zlib.error as exc:
        raise corrupt_gzip(exc) from None
    if not inflater.eof:
        raise TraceFileError("gzip data ends early; the .gz file is truncated")
    del out[size:]
    return out


def _presized(f: Any, limit: int) -> bytearray:
    """A buffer of the size the gzip trailer announces (ISIZE, the size mod 2**32), so inflating does not
    keep reallocating; trusted only up to 32x the compressed size and the limit (a bomb gets no more)."""
    compressed = os.fstat(f.fileno()).st_size
    if compressed < 18:
        return bytearray()
    f.seek(-4, os.SEEK_END)
    announced = int.from_bytes(f.read(4), "little")
    f.seek(0)
    return bytearray(min(announced, 32 * compressed, limit))
