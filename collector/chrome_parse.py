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
import mmap
import os
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from collector.chrome import STREAMSCOPE_KEY, TraceFileError

try:
    import msgspec

    HAVE_MSGSPEC = True
except ImportError:  # pragma: no cover - exercised where msgspec is missing
    msgspec = None  # type: ignore[assignment]
    HAVE_MSGSPEC = False

BATCH = 25_000
"""Events decoded per batch on the fast path (bounds the Python objects alive at once)."""

_MAX_TS_US = 9.0e15  # |ts| beyond this does not fit int64 nanoseconds


class Field(NamedTuple):
    column: str  # EVENT_COLUMNS name
    key: str  # JSON key; "args.x" lives in the event's args object
    kind: str  # str | id | time | int | bool
    ours: bool  # read only from Streamscope files (elsewhere the column keeps its default)

    @property
    def attr(self) -> str:
        """Attribute path on the decoded msgspec struct."""
        if not self.key.startswith("args."):
            return self.key
        return "args." + self.key[5:].lower().replace(" ", "_")


SPEC: tuple[Field, ...] = tuple(
    Field(*row)
    for row in (
        ("ph", "ph", "str", False),
        ("cat", "cat", "str", False),
        ("name", "name", "str", False),
        ("pid", "pid", "id", False),
        ("tid", "tid", "id", False),
        ("ts_ns", "ts", "time", False),
        ("dur_ns", "dur", "time", False),
        ("flow_id", "id", "id", False),
        ("arg_name", "args.name", "str", False),
        ("arg_stream", "args.stream", "int", False),
        ("arg_device", "args.device", "int", False),
        ("arg_correlation", "args.correlation", "int", False),
        ("arg_external_id", "args.External id", "int", False),
        ("arg_bytes", "args.bytes", "int", False),
        ("arg_python_id", "args.Python id", "int", False),
        ("arg_python_parent_id", "args.Python parent id", "int", False),
        ("arg_kind", "args.kind", "str", True),
        ("arg_memory_kind", "args.memory_kind", "str", True),
        ("arg_non_blocking", "args.non_blocking", "bool", True),
        ("arg_step", "args.step", "int", True),
        ("arg_source", "args.source", "str", True),
        ("arg_cause", "args.cause", "str", True),
        ("arg_launch_id", "args.launch_id", "int", True),
        ("arg_id", "args.id", "int", True),
    )
)
_DEFAULTS = {"str": "", "id": -1, "time": math.nan, "int": -1, "bool": False}
_EXPECT = {"str": "a string", "id": "an integer or a string", "int": "an integer", "bool": "true or false"}
TS, DUR = 5, 6  # SPEC positions of ts and dur


def active(ours: bool) -> list[int]:
    """SPEC positions read from a file: all for ours, the non-``ours`` ones for any other trace."""
    return [i for i, f in enumerate(SPEC) if ours or not f.ours]


# ------------------------------------------------------------------------------------------- bytes


def read_bytes(path: str, max_inflated_bytes: int) -> bytearray | mmap.mmap:
    """The file's JSON bytes, writable (the fast path brackets batches in place).

    A plain file is memory-mapped copy-on-write (no copy is made; the file itself never changes); a gzip
    file is inflated in chunks and refused once it passes ``max_inflated_bytes``.
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
            f.seek(0)
            if magic == b"\x1f\x8b":
                return _inflate(f, max_inflated_bytes)
            if os.fstat(f.fileno()).st_size == 0:
                return bytearray()
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
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


_ABSENT = object()


def _key_value(event: dict[str, Any], key: str) -> Any:
    if key.startswith("args."):
        args = event.get("args")
        return args.get(key[5:], _ABSENT) if isinstance(args, dict) else _ABSENT
    return event.get(key, _ABSENT)


def check_event(event: Any, index: int, fields: Sequence[int]) -> tuple[Any, ...]:
    """One decoded event as a row of the SPEC ``fields`` (defaults for missing keys); raise on a bad one."""
    if not isinstance(event, dict):
        raise TraceFileError(f"event {index}: not a JSON object")
    if "ph" not in event:
        raise TraceFileError(f"event {index}: missing 'ph'")
    args = event.get("args")
    if args is not None and not isinstance(args, dict):
        raise TraceFileError(f"event {index}: 'args' should be an object")
    row = []
    for i in fields:
        _, key, kind, _ = SPEC[i]
        value = _key_value(event, key)
        if value is _ABSENT:
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


class _Codes(dict[str, int]):
    """str -> category code, growing on first sight."""

    def __missing__(self, key: str) -> int:
        code = self[key] = len(self)
        return code


class _Columns:
    """Preallocated event columns filled batch by batch; strings become category codes on the fly.

    ``fields`` are the SPEC positions filled from the file; the others keep their default.
    """

    def __init__(self, n: int, fields: Sequence[int]) -> None:
        self.n = n
        self.fields = list(fields)
        self.arrays: list[np.ndarray] = []
        self.codes: list[_Codes] = []
        for f in SPEC:
            dtype = {"str": np.int32, "bool": np.bool_}.get(f.kind, np.int64)
            fill = 0 if f.kind in ("str", "bool") else -1
            self.arrays.append(np.full(n, fill, dtype=dtype))
            self.codes.append(_Codes({"": 0}) if f.kind == "str" else _Codes())
        self.id_names: dict[str, int] = {}

    def add(self, start: int, count: int, columns: Sequence[Iterable[Any]]) -> None:
        """Fill rows ``start:start+count`` from one iterable per active field, then check X events."""
        stop = start + count
        for i, col in zip(self.fields, columns, strict=True):
            kind, out = SPEC[i].kind, self.arrays[i]
            if kind == "str":
                out[start:stop] = np.fromiter(map(self.codes[i].__getitem__, col), np.int32, count)
            elif kind == "id":
                out[start:stop] = self._ids(list(col))
            elif kind == "time":
                out[start:stop] = _ns(np.fromiter(col, np.float64, count), SPEC[i].key, start)
            else:
                out[start:stop] = np.fromiter(col, out.dtype, count)
        self._check_x(start, stop)

    def _check_x(self, start: int, stop: int) -> None:
        x_code = self.codes[0].get("X")
        if x_code is None:
            return
        is_x = self.arrays[0][start:stop] == x_code
        for i, key in ((TS, "ts"), (DUR, "dur")):
            bad = np.flatnonzero(is_x & (self.arrays[i][start:stop] == _MISSING_NS))
            if len(bad):
                raise TraceFileError(f"event {start + bad[0]}: 'X' event is missing '{key}'")
        dur = self.arrays[DUR][start:stop]
        bad = np.flatnonzero(is_x & (dur < 0))
        if len(bad):
            raise TraceFileError(f"event {start + bad[0]}: negative duration ({dur[bad[0]] / 1000:g} us)")

    def _ids(self, col: list[Any]) -> np.ndarray:
        try:
            return np.fromiter(col, np.int64, len(col))
        except (TypeError, ValueError, OverflowError):
            return np.array([self._id(v) for v in col], dtype=np.int64)

    def _id(self, value: Any) -> int:
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return value
        return self.id_names.setdefault(str(value), -2 - len(self.id_names))

    def finish(self) -> tuple[dict[str, Any], dict[int, str]]:
        """The columns (EVENT_COLUMNS order; strings as pandas Categoricals) and the id names."""
        out: dict[str, Any] = {}
        for i, f in enumerate(SPEC):
            arr = self.arrays[i]
            if f.kind == "time":
                arr[arr == _MISSING_NS] = -1
            if f.kind == "str":
                cats = pd.Index(list(self.codes[i]), dtype=object)
                out[f.column] = pd.Categorical.from_codes(arr, categories=cats)
            else:
                out[f.column] = arr
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


# ------------------------------------------------------------------------------------ stdlib


def _syntax_error(data: Any, detail: str, pos: int | None) -> TraceFileError:
    if len(data) < (1 << 20) and not bytes(data).strip():
        return TraceFileError("the file is empty; expected Chrome trace JSON")
    if pos is not None and pos >= len(data):
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


def parse_stdlib(data: Any) -> tuple[dict[str, Any], dict[str, Any], dict[int, str]]:
    """Top-level object, columns (EVENT_COLUMNS) and id names, with the stdlib json module."""
    try:
        doc = json.loads(data if isinstance(data, (bytes, bytearray)) else data[:])
    except json.JSONDecodeError as exc:
        pos = len(data) if exc.pos >= len(exc.doc.rstrip()) else exc.pos
        raise _syntax_error(data, f"{exc.msg} at character {exc.pos}", pos) from None
    except UnicodeDecodeError:
        raise TraceFileError("not valid JSON (not UTF-8 text); expected Chrome trace JSON") from None
    top, events = _split_top(doc)
    del doc
    if not isinstance(events, list):
        raise TraceFileError("'traceEvents' is not an array")
    fields = active(STREAMSCOPE_KEY in top)
    columns = _Columns(len(events), fields)
    for start in range(0, len(events), BATCH):
        rows = [check_event(ev, start + k, fields) for k, ev in enumerate(events[start : start + BATCH])]
        columns.add(start, len(rows), list(zip(*rows, strict=True)) if rows else [()] * len(fields))
    out, id_names = columns.finish()
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

    class _KinetoArgs(msgspec.Struct, gc=False, frozen=True):
        name: str = ""
        stream: int = -1
        device: int = -1
        correlation: int = -1
        external_id: int = msgspec.field(default=-1, name="External id")
        bytes: int = -1
        python_id: int = msgspec.field(default=-1, name="Python id")
        python_parent_id: int = msgspec.field(default=-1, name="Python parent id")

    class _OurArgs(_KinetoArgs, gc=False, frozen=True):
        kind: str = ""
        memory_kind: str = ""
        non_blocking: bool = False
        step: int = -1
        source: str = ""
        cause: str = ""
        launch_id: int = -1
        id: int = -1

    class _Top(msgspec.Struct):
        traceEvents: list[msgspec.Raw]

    _NO_KINETO_ARGS = _KinetoArgs()
    _NO_OUR_ARGS = _OurArgs()

    class _KinetoEvent(msgspec.Struct, gc=False):
        ph: str
        cat: str = ""
        name: str = ""
        pid: int | str = -1
        tid: int | str = -1
        ts: float = math.nan
        dur: float = math.nan
        id: int | str = -1
        args: _KinetoArgs = _NO_KINETO_ARGS

    class _OurEvent(msgspec.Struct, gc=False):
        ph: str
        cat: str = ""
        name: str = ""
        pid: int | str = -1
        tid: int | str = -1
        ts: float = math.nan
        dur: float = math.nan
        id: int | str = -1
        args: _OurArgs = _NO_OUR_ARGS


_RAW_AT = re.compile(r"at `\$\[(\d+)\]")


def parse_fast(data: bytearray | mmap.mmap) -> tuple[dict[str, Any], dict[str, Any], dict[int, str]]:
    """Top-level object, columns (EVENT_COLUMNS) and id names, with msgspec in batches.

    One pass finds the events (``traceEvents`` as raw slices of ``data``, no copies). Each batch of events
    is then decoded in place: the commas just outside it are swapped for ``[`` and ``]`` for the decode
    and restored after, so no batch is ever copied.
    """
    top, events, span = _top_and_events(data)
    ours = STREAMSCOPE_KEY in top
    fields = active(ours)
    getters = [attrgetter(f.attr) for f in (SPEC[i] for i in fields) if not f.key.startswith("args.")]
    arg_getters = [attrgetter(f.attr[5:]) for f in (SPEC[i] for i in fields) if f.key.startswith("args.")]
    args_of = attrgetter("args")
    event_type: Any = _OurEvent if ours else _KinetoEvent
    decoder = msgspec.json.Decoder(list[event_type])
    columns = _Columns(len(events), fields)
    view = memoryview(data)
    with _gc_paused():
        for lo in range(0, len(events), BATCH):
            chunk = events[lo : lo + BATCH]
            try:
                decoded = _decode_batch(decoder, data, view, chunk, span, lo == 0, lo + BATCH >= len(events))
            except msgspec.ValidationError as exc:
                raise _explain(exc, chunk, lo, fields) from None
            args = list(map(args_of, decoded))
            cols = [map(g, decoded) for g in getters] + [map(g, args) for g in arg_getters]
            columns.add(lo, len(decoded), cols)
            del decoded, args, cols
    del events
    view.release()
    out, id_names = columns.finish()
    return top, out, id_names


def _address(buf: Any) -> int:
    return int(np.frombuffer(buf, dtype=np.uint8).ctypes.data)


def _decode_batch(
    decoder: Any, data: Any, view: memoryview, chunk: Sequence[Any], span: tuple[int, int] | None,
    first: bool, last: bool,
) -> Any:
    if span is None:  # events not located in data: decode a joined copy
        return decoder.decode(b"".join((b"[", b",".join(chunk), b"]")))
    base = _address(data)
    start = _address(chunk[0]) - base
    end = _address(chunk[-1]) - base + len(chunk[-1])
    left = span[0] if first else data.rfind(b",", 0, start)
    right = span[1] if last else data.find(b",", end)
    saved = data[left], data[right]
    data[left], data[right] = 0x5B, 0x5D  # "[" and "]"
    try:
        return decoder.decode(view[left : right + 1])
    finally:
        data[left], data[right] = saved


def _top_and_events(data: Any) -> tuple[dict[str, Any], list[Any], tuple[int, int] | None]:
    """Top-level object (without traceEvents), the events as msgspec.Raw, and the array's [ ] positions."""
    try:
        events = msgspec.json.decode(data, type=_Top).traceEvents
    except (msgspec.ValidationError, msgspec.DecodeError):
        events = None  # not the usual shape: the general path below finds out what it is
    if events:
        base = _address(data)
        first = _address(events[0]) - base
        last_end = _address(events[-1]) - base + len(events[-1])
        open_at, close_at = data.rfind(b"[", 0, first), data.find(b"]", last_end)
        if data[open_at + 1 : first].strip() == b"" and data[last_end:close_at].strip() == b"":
            rest = bytes(data[:open_at]) + b"[]" + bytes(data[close_at + 1 :])
            top = msgspec.json.decode(rest, type=dict[str, Any])
            top.pop("traceEvents", None)
            return top, events, (open_at, close_at)
    try:
        doc = msgspec.json.decode(data, type=dict[str, msgspec.Raw] | list[msgspec.Raw])
    except msgspec.ValidationError:
        raise TraceFileError("the JSON is not a trace: expected an object with 'traceEvents' or an array") from None
    except msgspec.DecodeError as exc:
        text = str(exc)
        pos = len(data) if "truncated" in text else None
        raise _syntax_error(data, text.replace("JSON is malformed: ", ""), pos) from None
    top_raw, events_raw = _split_top(doc)
    del doc
    try:
        top = {k: msgspec.json.decode(v) for k, v in top_raw.items()}
        if not isinstance(events_raw, list):
            events_raw = msgspec.json.decode(events_raw, type=list[msgspec.Raw])
    except msgspec.ValidationError:
        raise TraceFileError("'traceEvents' is not an array") from None
    return top, events_raw, None


def _explain(exc: Exception, chunk: Sequence[Any], start: int, fields: Sequence[int]) -> TraceFileError:
    """The checker's message for the event msgspec refused (same text as the stdlib path)."""
    found = _RAW_AT.search(str(exc))
    if not found:
        return TraceFileError(f"bad event ({exc})")
    k = int(found.group(1))
    try:
        check_event(json.loads(bytes(chunk[k])), start + k, fields)
    except TraceFileError as err:
        return err
    return TraceFileError(f"event {start + k}: {str(exc).split(' - at ')[0]}")
