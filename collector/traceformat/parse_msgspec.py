"""The fast path of :func:`collector.traceformat.events.read_events`: msgspec, in batches, in place (internal).

A plain file arrives memory-mapped copy-on-write. One msgspec pass finds every event as a raw slice of the
input (no copies). Events are then decoded into typed structs ``parse_json.BATCH`` at a time with the
garbage collector paused: the commas just outside a batch are swapped for ``[`` and ``]`` for the decode
and restored after, so no batch is copied. Each batch goes straight into the preallocated columns, so only
one batch of Python objects is ever alive. A struct field of the wrong type is re-checked by
``parse_json.check_event`` to give the same message as the stdlib path.
"""

from __future__ import annotations

import gc
import json
import math
import mmap
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from collector.traceformat import parse_json
from collector.traceformat.parse_json import SPEC, Columns, active, check_event, split_top, syntax_error
from collector.traceformat.spec import STREAMSCOPE_KEY, TraceFileError


@contextmanager
def _gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# args fields accept null as "absent" (Kineto writes "Python parent id": null for a root Python frame)
class _KinetoArgs(msgspec.Struct, gc=False, frozen=True):
    name: str | None = ""
    stream: int | str | None = -1  # ROCm writes stream ids as strings ("0x0")
    device: int | None = -1
    correlation: int | None = -1
    external_id: int | None = msgspec.field(default=-1, name="External id")
    bytes: int | None = -1
    python_id: int | None = msgspec.field(default=-1, name="Python id")
    python_parent_id: int | None = msgspec.field(default=-1, name="Python parent id")
    in_msg_nelems: int | None = msgspec.field(default=-1, name="In msg nelems")
    out_msg_nelems: int | None = msgspec.field(default=-1, name="Out msg nelems")
    dtype: str | float | None = ""
    process_group_name: str | float | None = msgspec.field(default="", name="Process Group Name")
    process_group_description: str | float | None = msgspec.field(default="", name="Process Group Description")


class _OurArgs(msgspec.Struct, gc=False, frozen=True):
    name: str | None = ""
    stream: int | str | None = -1
    bytes: int | None = -1
    kind: str | None = ""
    memory_kind: str | None = ""
    non_blocking: bool | None = False
    step: int | None = -1
    source: str | None = ""
    cause: str | None = ""
    launch_id: int | None = -1
    id: int | None = -1
    group: str | None = ""


class _Top(msgspec.Struct):
    traceEvents: list[msgspec.Raw]


_NO_KINETO_ARGS = _KinetoArgs()
_NO_OUR_ARGS = _OurArgs()


class _Event(msgspec.Struct, gc=False):
    """The fields every event shares; the two subclasses add ``args`` (last), and inherit ``gc=False``."""

    ph: str
    cat: str = ""
    name: str = ""
    pid: int | str = -1
    tid: int | str = -1
    ts: float = math.nan
    dur: float = math.nan
    id: int | str = -1


class _KinetoEvent(_Event):
    args: _KinetoArgs = _NO_KINETO_ARGS


class _OurEvent(_Event):
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
    columns = Columns(len(events), fields)
    view = memoryview(data)
    with _gc_paused():
        batch = parse_json.BATCH
        for lo in range(0, len(events), batch):
            chunk = events[lo : lo + batch]
            try:
                decoded = _decode_batch(decoder, data, view, chunk, span, lo == 0, lo + batch >= len(events))
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
    decoder: Any,
    data: Any,
    view: memoryview,
    chunk: Sequence[Any],
    span: tuple[int, int] | None,
    first: bool,
    last: bool,
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
        raise syntax_error(data, text.replace("JSON is malformed: ", ""), pos) from None
    top_raw, events_raw = split_top(doc)
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
