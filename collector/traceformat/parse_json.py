"""Event rows to columns for :func:`collector.traceformat.events.read_events` (internal), and the stdlib-json path.

* :data:`SPEC`: the fields read from each event and their EVENT_COLUMNS column.
* :func:`check_event`: one event's fields, or a one-line error naming the event; both paths use it, so a bad
  event gets the same message whichever path found it.
* ``Columns``: preallocated numpy columns filled batch by batch; strings become category codes on the fly.
* :func:`parse_stdlib`: the whole table with the stdlib ``json`` module (the reference the fast path is tested against).

The fast path is collector.traceformat.parse_msgspec (msgspec).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from collector.traceformat.collective_meta import FOLDED, fold_collectives
from collector.traceformat.spec import STREAMSCOPE_KEY, TraceFileError

BATCH = 25_000
"""Events decoded per batch on the fast path (bounds the Python objects alive at once)."""

_MAX_TS_US = 9.0e15  # |ts| beyond this does not fit int64 nanoseconds


class Field(NamedTuple):
    column: str  # EVENT_COLUMNS name
    key: str  # JSON key; "args.x" lives in the event's args object
    kind: str  # str | text (a string, or a number taken as its text) | id | time | int | hexint (an int, or a
    # string like "0x0" as ROCm writes stream ids) | bool
    only: str  # "ours": read only from Streamscope files; "kineto": only from other traces; "": from all

    @property
    def attr(self) -> str:
        """Attribute path on the decoded msgspec struct."""
        if not self.key.startswith("args."):
            return self.key
        return "args." + self.key[5:].lower().replace(" ", "_")


SPEC: tuple[Field, ...] = tuple(
    Field(*row)
    for row in (
        ("ph", "ph", "str", ""),
        ("cat", "cat", "str", ""),
        ("name", "name", "str", ""),
        ("pid", "pid", "id", ""),
        ("tid", "tid", "id", ""),
        ("ts_ns", "ts", "time", ""),
        ("dur_ns", "dur", "time", ""),
        ("flow_id", "id", "id", "kineto"),
        ("arg_name", "args.name", "str", ""),
        ("arg_stream", "args.stream", "hexint", ""),
        ("arg_device", "args.device", "int", "kineto"),
        ("arg_correlation", "args.correlation", "int", "kineto"),
        ("arg_external_id", "args.External id", "int", "kineto"),
        ("arg_bytes", "args.bytes", "int", ""),
        ("arg_python_id", "args.Python id", "int", "kineto"),
        ("arg_python_parent_id", "args.Python parent id", "int", "kineto"),
        ("arg_kind", "args.kind", "str", "ours"),
        ("arg_memory_kind", "args.memory_kind", "str", "ours"),
        ("arg_non_blocking", "args.non_blocking", "bool", "ours"),
        ("arg_step", "args.step", "int", "ours"),
        ("arg_source", "args.source", "str", "ours"),
        ("arg_cause", "args.cause", "str", "ours"),
        ("arg_launch_id", "args.launch_id", "int", "ours"),
        ("arg_id", "args.id", "int", "ours"),
        ("arg_group", "args.group", "str", "ours"),
        # torch.profiler's collective metadata (NCCL kernels, record_param_comms); Columns.finish folds
        # these into arg_bytes and arg_group, so they are not EVENT_COLUMNS
        ("in_nelems", "args.In msg nelems", "int", "kineto"),
        ("out_nelems", "args.Out msg nelems", "int", "kineto"),
        ("dtype", "args.dtype", "text", "kineto"),
        ("pg_name", "args.Process Group Name", "text", "kineto"),
        ("pg_desc", "args.Process Group Description", "text", "kineto"),
    )
)
_DEFAULTS = {"str": "", "text": "", "id": -1, "time": math.nan, "int": -1, "hexint": -1, "bool": False}
_EXPECT = {
    "str": "a string",
    "text": "a string or a number",
    "id": "an integer or a string",
    "int": "an integer",
    "hexint": "an integer",
    "bool": "true or false",
}
TS, DUR = 5, 6  # SPEC positions of ts and dur


def active(ours: bool) -> list[int]:
    """SPEC positions read from a file: ours (Streamscope) or another trace (the rest keep defaults)."""
    return [i for i, f in enumerate(SPEC) if f.only in ("", "ours" if ours else "kineto")]


# ------------------------------------------------------------------------------------ event check


_ABSENT = object()


def _key_value(event: dict[str, Any], key: str) -> Any:
    if key.startswith("args."):  # in args, null counts as absent (Kineto: "Python parent id": null)
        args = event.get("args")
        value = args.get(key[5:]) if isinstance(args, dict) else None
        return _ABSENT if value is None else value
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
            or (kind == "text" and (isinstance(value, str) or is_int or isinstance(value, float)))
            or (kind == "int" and is_int)
            or (kind == "hexint" and (is_int or _int_text(value) is not None))
            or (kind == "bool" and isinstance(value, bool))
            or (kind == "id" and (is_int or isinstance(value, str)))
        ):
            raise TraceFileError(f"event {index}: '{key}' should be {_EXPECT[kind]} ({_shown(value)})")
        if kind == "text":
            value = _text(value)
        row.append(_int_text(value) if kind == "hexint" and isinstance(value, str) else value)
    return tuple(row)


def _int_text(value: Any) -> int | None:
    """An integer written as a string, decimal or hex (ROCm's ``"stream": "0x0"``); None for anything else."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def _text(value: Any) -> Any:
    """A ``text`` field's value: strings as they are, numbers as their text, null as absent."""
    if value is None or isinstance(value, str):
        return value
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return f"got {text if len(text) <= 40 else text[:37] + '...'}"


# ------------------------------------------------------------------------------------ columns


class _Codes(dict[str, int]):
    """str -> category code, growing on first sight."""

    def __missing__(self, key: str | None) -> int:
        if key is None:  # a null in args: absent
            return self[""]
        code = self[key] = len(self)
        return code


class Columns:
    """Preallocated event columns filled batch by batch; strings become category codes on the fly.

    ``fields`` are the SPEC positions filled from the file; the others keep their default.
    """

    def __init__(self, n: int, fields: Sequence[int]) -> None:
        self.n = n
        self.fields = list(fields)
        self.arrays: list[np.ndarray] = []
        self.fills: list[int] = []
        self.codes: list[_Codes] = []
        for f in SPEC:
            dtype = {"str": np.int32, "text": np.int32, "bool": np.bool_}.get(f.kind, np.int64)
            fill = 0 if f.kind in ("str", "text", "bool") else -1
            lazy = f.column in FOLDED  # allocated on the first event that has it (collectives are few)
            self.arrays.append(np.full(0 if lazy else n, fill, dtype=dtype))
            self.fills.append(fill)
            self.codes.append(_Codes({"": 0}) if f.kind in ("str", "text") else _Codes())
        self.id_names: dict[str, int] = {}

    def add(self, start: int, count: int, columns: Sequence[Iterable[Any]]) -> None:
        """Fill rows ``start:start+count`` from one iterable per active field, then check X events."""
        stop = start + count
        for i, col in zip(self.fields, columns, strict=True):
            kind, out = SPEC[i].kind, self.arrays[i]
            if len(out) < self.n:  # a lazy column: allocated once an event has the field
                values = self._values(i, col, count)
                if not (values != self.fills[i]).any():
                    continue
                out = self.arrays[i] = np.full(self.n, self.fills[i], dtype=out.dtype)
                out[start:stop] = values
            elif kind == "str":
                out[start:stop] = np.fromiter(map(self.codes[i].__getitem__, col), np.int32, count)
            elif kind == "text":
                out[start:stop] = self._values(i, col, count)
            elif kind == "id":
                out[start:stop] = self._ids(list(col))
            elif kind == "time":
                out[start:stop] = _ns(np.fromiter(col, np.float64, count), SPEC[i].key, start)
            elif kind == "hexint":
                out[start:stop] = _hex_numbers(col, count, start, SPEC[i].key)
            else:
                out[start:stop] = _numbers(col, out.dtype, count, _DEFAULTS[kind])
        self._check_x(start, stop)

    def _values(self, i: int, col: Iterable[Any], count: int) -> np.ndarray:
        """One batch of a lazy column (``text`` or ``int``)."""
        if SPEC[i].kind == "text":
            return np.fromiter(map(self.codes[i].__getitem__, map(_text, col)), np.int32, count)
        return _numbers(col, np.int64, count, _DEFAULTS[SPEC[i].kind])

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
        lazy = [i for i, f in enumerate(SPEC) if f.column in FOLDED]
        fold = any(len(self.arrays[i]) for i in lazy)  # some event carried collective metadata
        for i in lazy:
            if fold and not len(self.arrays[i]):
                self.arrays[i] = np.full(self.n, self.fills[i], dtype=self.arrays[i].dtype)
        out: dict[str, Any] = {}
        for i, f in enumerate(SPEC):
            arr = self.arrays[i]
            if f.kind == "time":
                arr[arr == _MISSING_NS] = -1
            if f.kind in ("str", "text"):
                cats = pd.Index(list(self.codes[i]), dtype=object)
                out[f.column] = pd.Categorical.from_codes(arr, categories=cats)
            else:
                out[f.column] = arr
        folded = {c: out.pop(c) for c in FOLDED}
        if fold:
            fold_collectives(out, folded)
        return out, {v: k for k, v in self.id_names.items()}


def _numbers(col: Iterable[Any], dtype: Any, count: int, default: Any) -> np.ndarray:
    """An int or bool column; a None (null in args) becomes ``default``."""
    values = col if isinstance(col, (list, tuple)) else list(col)
    try:
        return np.fromiter(values, dtype, count)
    except TypeError:
        return np.fromiter((default if v is None else v for v in values), dtype, count)


def _hex_numbers(col: Iterable[Any], count: int, start: int, key: str) -> np.ndarray:
    """An int column whose values may also be integer strings ("0x0", "7"); null is -1."""
    values = col if isinstance(col, (list, tuple)) else list(col)
    try:
        return np.fromiter(values, np.int64, count)
    except (TypeError, ValueError):
        pass
    out = np.empty(count, dtype=np.int64)
    for k, v in enumerate(values):  # only for traces that write ids as strings (ROCm)
        number = -1 if v is None else (v if isinstance(v, int) and not isinstance(v, bool) else _int_text(v))
        if number is None:
            raise TraceFileError(f"event {start + k}: '{key}' should be an integer ({_shown(v)})")
        out[k] = number
    return out


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


def syntax_error(data: Any, detail: str, pos: int | None) -> TraceFileError:
    if len(data) < (1 << 20) and not bytes(data).strip():
        return TraceFileError("the file is empty; expected Chrome trace JSON")
    if pos is not None and pos >= len(data):
        return TraceFileError("truncated JSON: the file ends before the trace does")
    return TraceFileError(f"not valid JSON ({detail}); expected Chrome trace JSON")


def split_top(doc: Any) -> tuple[dict[str, Any], Any]:
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
        raise syntax_error(data, f"{exc.msg} at character {exc.pos}", pos) from None
    except UnicodeDecodeError:
        raise TraceFileError("not valid JSON (not UTF-8 text); expected Chrome trace JSON") from None
    top, events = split_top(doc)
    del doc
    if not isinstance(events, list):
        raise TraceFileError("'traceEvents' is not an array")
    fields = active(STREAMSCOPE_KEY in top)
    columns = Columns(len(events), fields)
    for start in range(0, len(events), BATCH):
        rows = [check_event(ev, start + k, fields) for k, ev in enumerate(events[start : start + BATCH])]
        columns.add(start, len(rows), list(zip(*rows, strict=True)) if rows else [()] * len(fields))
    out, id_names = columns.finish()
    return top, out, id_names
