"""Bytes to event columns for :func:`collector.chrome.read_events` (internal).

* :func:`read_bytes`: the file's bytes; gzip (by magic bytes) is inflated in chunks with a cap.
* :func:`parse_fast`: msgspec. The top level is decoded with ``traceEvents`` kept as raw slices of the
  input, then events are decoded into typed structs in batches (garbage collector paused) and each batch
  is turned into columns at once, so only one batch of Python objects is alive at a time.
* :func:`parse_stdlib`: the same table with the stdlib ``json`` module (fallback, slower, more memory).

Both paths run every event through one checker (:func:`check_event`) so that a bad event gets the same
one-line message whichever path found it.
"""

from __future__ import annotations

import gc
import json
import math
import re
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from collector.chrome import TraceFileError

try:
    import msgspec

    HAVE_MSGSPEC = True
except ImportError:  # pragma: no cover - exercised where msgspec is missing
    msgspec = None  # type: ignore[assignment]
    HAVE_MSGSPEC = False

BATCH = 100_000
"""Events decoded per batch on the fast path (bounds the Python objects alive at once)."""

_MAX_TS_US = 9.0e15  # |ts| beyond this does not fit int64 nanoseconds

# (column, JSON key, type) in EVENT_COLUMNS order; "args.x" keys live in the event's args object.
SPEC: tuple[tuple[str, str, str], ...] = (
    ("ph", "ph", "str"),
    ("cat", "cat", "str"),
    ("name", "name", "str"),
    ("pid", "pid", "id"),
    ("tid", "tid", "id"),
    ("ts_ns", "ts", "time"),
    ("dur_ns", "dur", "time"),
    ("flow_id", "id", "id"),
    ("arg_name", "args.name", "str"),
    ("arg_stream", "args.stream", "int"),
    ("arg_device", "args.device", "int"),
    ("arg_correlation", "args.correlation", "int"),
    ("arg_external_id", "args.External id", "int"),
    ("arg_bytes", "args.bytes", "int"),
    ("arg_python_id", "args.Python id", "int"),
    ("arg_python_parent_id", "args.Python parent id", "int"),
    ("arg_kind", "args.kind", "str"),
    ("arg_memory_kind", "args.memory_kind", "str"),
    ("arg_non_blocking", "args.non_blocking", "bool"),
    ("arg_step", "args.step", "int"),
    ("arg_source", "args.source", "str"),
    ("arg_cause", "args.cause", "str"),
    ("arg_launch_id", "args.launch_id", "int"),
    ("arg_id", "args.id", "int"),
)
_DEFAULTS = {"str": "", "id": -1, "time": math.nan, "int": -1, "bool": False}
_EXPECT = {"str": "a string", "id": "an integer or a string", "int": "an integer", "bool": "true or false"}


# ------------------------------------------------------------------------------------------- bytes


def read_bytes(path: str, max_inflated_bytes: int) -> bytes | bytearray:
    """The file's JSON bytes; a gzip file is inflated, refused once it passes ``max_inflated_bytes``."""
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
            f.seek(0)
            if magic != b"\x1f\x8b":
                return f.read()
            return _inflate(f, max_inflated_bytes)
    except OSError as exc:
        raise TraceFileError(f"cannot read the file ({exc.strerror or exc})") from None


def _inflate(f: Any, limit: int) -> bytearray:
    out = bytearray()
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        while chunk := f.read(1 << 20):
            while chunk:
                out += inflater.decompress(chunk, 1 << 24)
                if len(out) > limit:
                    raise TraceFileError(
                        f"gzip inflates past the limit of {limit:,} bytes (max_inflated_bytes); "
                        "refusing a likely gzip bomb"
                    )
                chunk = inflater.unconsumed_tail
                if inflater.eof and not chunk and inflater.unused_data.strip(b"\0"):
                    chunk = inflater.unused_data  # another gzip member follows
                    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except zlib.error as exc:
        raise TraceFileError(f"gzip data does not inflate ({exc}); the .gz file is corrupt") from None
    if not inflater.eof:
        raise TraceFileError("gzip data ends early; the .gz file is truncated")
    return out


# ------------------------------------------------------------------------------------ event check


def _key_value(event: dict[str, Any], key: str) -> Any:
    if key.startswith("args."):
        args = event.get("args")
        return args.get(key[5:]) if isinstance(args, dict) else None
    return event.get(key)


def check_event(event: Any, index: int) -> tuple[Any, ...]:
    """One decoded event as a row in SPEC order (defaults for missing keys); raise on a bad field."""
    if not isinstance(event, dict):
        raise TraceFileError(f"event {index}: not a JSON object")
    if "ph" not in event:
        raise TraceFileError(f"event {index}: missing 'ph'")
    args = event.get("args")
    if args is not None and not isinstance(args, dict):
        raise TraceFileError(f"event {index}: 'args' should be an object")
    row = []
    for _, key, kind in SPEC:
        value = _key_value(event, key)
        if value is None:
            row.append(_DEFAULTS[kind])
            continue
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if kind == "time":
            if not (is_int or isinstance(value, float)) or not math.isfinite(value):
                raise TraceFileError(f"event {index}: '{key}' is not a number ({_shown(value)})")
        elif not (
            (kind == "str" and isinstance(value, str))
            or (kind == "int" and is_int)
            or (kind == "bool" and isinstance(value, bool))
            or (kind == "id" and (is_int or isinstance(value, str)))
        ):
            raise TraceFileError(f"event {index}: '{key}' should be {_EXPECT[kind]} ({_shown(value)})")
        row.append(value)
    return tuple(row)


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return f"got {text if len(text) <= 40 else text[:37] + '...'}"


# ------------------------------------------------------------------------------------ columns


class _Columns:
    """Preallocated event columns filled batch by batch; strings become category codes on the fly."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.arrays: list[np.ndarray] = []
        self.codes: list[dict[str, int]] = []
        for _, _, kind in SPEC:
            dtype = {"str": np.int32, "bool": np.bool_}.get(kind, np.int64)
            self.arrays.append(np.empty(n, dtype=dtype))
            self.codes.append({})
        self.id_names: dict[str, int] = {}

    def add(self, start: int, columns: Sequence[Sequence[Any]]) -> None:
        count = len(columns[0])
        stop = start + count
        for i, (_, key, kind) in enumerate(SPEC):
            col = columns[i]
            out = self.arrays[i]
            if kind == "str":
                out[start:stop] = self._encode(col, self.codes[i])
            elif kind == "id":
                out[start:stop] = self._ids(col)
            elif kind == "time":
                out[start:stop] = _ns(np.array(col, dtype=np.float64), key, start)
            else:
                out[start:stop] = np.array(col, dtype=out.dtype)
        self._check_x(start, stop)

    def _check_x(self, start: int, stop: int) -> None:
        x_code = self.codes[0].get("X")
        if x_code is None:
            return
        is_x = self.arrays[0][start:stop] == x_code
        for i, key in ((5, "ts"), (6, "dur")):
            bad = np.flatnonzero(is_x & (self.arrays[i][start:stop] == _MISSING_NS))
            if len(bad):
                raise TraceFileError(f"event {start + bad[0]}: 'X' event is missing '{key}'")
        dur = self.arrays[6][start:stop]
        bad = np.flatnonzero(is_x & (dur < 0))
        if len(bad):
            raise TraceFileError(f"event {start + bad[0]}: negative duration ({dur[bad[0]] / 1000:g} us)")

    @staticmethod
    def _encode(col: Sequence[str], table: dict[str, int]) -> np.ndarray:
        codes, uniques = pd.factorize(np.array(col, dtype=object))
        remap = np.array([table.setdefault(u, len(table)) for u in uniques], dtype=np.int32)
        return remap[codes] if len(remap) else np.zeros(len(codes), dtype=np.int32)

    def _ids(self, col: Sequence[Any]) -> np.ndarray:
        try:
            return np.fromiter(col, dtype=np.int64, count=len(col))
        except (TypeError, ValueError, OverflowError):
            return np.array([self._id(v) for v in col], dtype=np.int64)

    def _id(self, value: Any) -> int:
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return value
        return self.id_names.setdefault(str(value), -2 - len(self.id_names))

    def finish(self) -> tuple[dict[str, Any], dict[int, str]]:
        out: dict[str, Any] = {}
        for i, (name, _, kind) in enumerate(SPEC):
            if kind == "str":
                cats = pd.Index(list(self.codes[i]), dtype=object)
                out[name] = pd.Categorical.from_codes(self.arrays[i], categories=cats)
            else:
                out[name] = self.arrays[i]
        return out, {v: k for k, v in self.id_names.items()}


_MISSING_NS = -(2**63)  # internal marker for a missing time; -1 in the finished table


def _ns(us: np.ndarray, key: str, start: int) -> np.ndarray:
    missing = np.isnan(us)
    big = np.flatnonzero(~missing & (np.abs(us) > _MAX_TS_US))
    if len(big):
        raise TraceFileError(f"event {start + big[0]}: '{key}' is out of range ({us[big[0]]:g} us)")
    ns = np.rint(np.where(missing, 0.0, us) * 1000.0).astype(np.int64)
    ns[missing] = _MISSING_NS
    return ns


def _finish(columns: _Columns) -> tuple[dict[str, Any], dict[str, Any], dict[int, str]]:
    for i in (5, 6):
        arr = columns.arrays[i]
        arr[arr == _MISSING_NS] = -1
    out, id_names = columns.finish()
    return {}, out, id_names


# ------------------------------------------------------------------------------------ stdlib


def _syntax_error(data: bytes | bytearray, detail: str, pos: int | None) -> TraceFileError:
    if not data.strip():
        return TraceFileError("the file is empty; expected Chrome trace JSON")
    if pos is not None and pos >= len(data.rstrip()):
        return TraceFileError("truncated JSON: the file ends before the trace does")
    return TraceFileError(f"not valid JSON ({detail}); expected Chrome trace JSON")


def _split_top(doc: Any) -> tuple[dict[str, Any], Any]:
    if isinstance(doc, list):
        return {}, doc
    if not isinstance(doc, dict):
        raise TraceFileError("the JSON is not a trace: expected an object with 'traceEvents' or an array")
    if "traceEvents" not in doc:
        raise TraceFileError("no 'traceEvents' in the top-level object; not a Chrome trace")
    return {k: v for k, v in doc.items() if k != "traceEvents"}, doc["traceEvents"]


def parse_stdlib(data: bytes | bytearray) -> tuple[dict[str, Any], dict[str, Any], dict[int, str]]:
    """Top-level object, columns (EVENT_COLUMNS) and id names, with the stdlib json module."""
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as exc:
        pos = len(data) if exc.pos >= len(exc.doc.rstrip()) else exc.pos
        raise _syntax_error(data, f"{exc.msg} at character {exc.pos}", pos) from None
    except UnicodeDecodeError:
        raise TraceFileError("not valid JSON (not UTF-8 text); expected Chrome trace JSON") from None
    top, events = _split_top(doc)
    del doc
    if not isinstance(events, list):
        raise TraceFileError("'traceEvents' is not an array")
    columns = _Columns(len(events))
    for start in range(0, len(events), BATCH):
        rows = [check_event(ev, start + k) for k, ev in enumerate(events[start : start + BATCH])]
        columns.add(start, list(zip(*rows, strict=True)))
    _, out, id_names = _finish(columns)
    return top, out, id_names


# ------------------------------------------------------------------------------------ msgspec


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


if HAVE_MSGSPEC:

    class _Args(msgspec.Struct, gc=False, frozen=True):
        name: str = ""
        stream: int = -1
        device: int = -1
        correlation: int = -1
        external_id: int = msgspec.field(default=-1, name="External id")
        bytes: int = -1
        python_id: int = msgspec.field(default=-1, name="Python id")
        python_parent_id: int = msgspec.field(default=-1, name="Python parent id")
        kind: str = ""
        memory_kind: str = ""
        non_blocking: bool = False
        step: int = -1
        source: str = ""
        cause: str = ""
        launch_id: int = -1
        id: int = -1

    _NO_ARGS = _Args()

    class _Event(msgspec.Struct, gc=False):
        ph: str
        cat: str = ""
        name: str = ""
        pid: int | str = -1
        tid: int | str = -1
        ts: float = math.nan
        dur: float = math.nan
        id: int | str = -1
        args: _Args = _NO_ARGS


_ATTR = {"External id": "external_id", "Python id": "python_id", "Python parent id": "python_parent_id"}
_GETTER = attrgetter(*(k if not k.startswith("args.") else "args." + _ATTR.get(k[5:], k[5:]) for _, k, _ in SPEC))
_RAW_AT = re.compile(r"at `\$\[(\d+)\]")


def parse_fast(data: bytes | bytearray) -> tuple[dict[str, Any], dict[str, Any], dict[int, str]]:
    """Top-level object, columns (EVENT_COLUMNS) and id names, with msgspec in batches."""
    try:
        doc = msgspec.json.decode(data, type=dict[str, msgspec.Raw] | list[msgspec.Raw])
    except msgspec.DecodeError as exc:
        text = str(exc)
        pos = len(data) if "truncated" in text else None
        raise _syntax_error(data, text.replace("JSON is malformed: ", ""), pos) from None
    top_raw, events_raw = _split_top(doc)
    del doc
    try:
        top = {k: msgspec.json.decode(v) for k, v in top_raw.items()}
        events = msgspec.json.decode(events_raw, type=list[msgspec.Raw])
    except msgspec.ValidationError:
        raise TraceFileError("'traceEvents' is not an array") from None
    del events_raw
    columns = _Columns(len(events))
    decoder = msgspec.json.Decoder(list[_Event])
    for start in range(0, len(events), BATCH):
        chunk = events[start : start + BATCH]
        blob = b"".join((b"[", b",".join(chunk), b"]"))
        try:
            with _gc_paused():
                decoded = decoder.decode(blob)
                rows = list(map(_GETTER, decoded))
                del decoded
        except msgspec.ValidationError as exc:
            raise _explain(exc, chunk, start) from None
        columns.add(start, list(zip(*rows, strict=True)) if rows else [()] * len(SPEC))
        del rows, blob
    del events
    _, out, id_names = _finish(columns)
    return top, out, id_names


def _explain(exc: Exception, chunk: Sequence[Any], start: int) -> TraceFileError:
    """The checker's message for the event msgspec refused (same text as the stdlib path)."""
    found = _RAW_AT.search(str(exc))
    if not found:
        return TraceFileError(f"bad event ({exc})")
    k = int(found.group(1))
    try:
        check_event(json.loads(bytes(chunk[k])), start + k)
    except TraceFileError as err:
        return err
    return TraceFileError(f"event {start + k}: {str(exc).split(' - at ')[0]}")
