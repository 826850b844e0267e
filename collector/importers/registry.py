"""The trace formats Streamscope reads, each recognised by its first bytes and read by its importer.

A file is never recognised by its name: :func:`detect` reads its head (collector.traceformat.head: the
stored bytes, the content inflated when gzip, the top-level JSON keys) and asks each format in
:data:`FORMATS`, in order, whether it claims it; :func:`collector.load.load_trace` hands the file to the
importer of the first that does.

To read a new format, write its importer module next to this one with ``claims(head) -> bool`` (from the
head alone) and ``load(path, *, max_inflated_bytes) -> Trace`` (one rank; errors as TraceFileError of one
line), and add a :class:`Format` for it to :data:`FORMATS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from collector.importers import kineto
from collector.model import Trace
from collector.traceformat import read
from collector.traceformat.head import Head, read_head
from collector.traceformat.spec import TraceFileError


@dataclass(frozen=True)
class Format:
    """One format: its name, how messages call it, its claim on a file's head and its importer."""

    name: str
    what: str
    claims: Callable[[Head], bool]
    load: Callable[..., Trace] | None
    """``load(path, *, max_inflated_bytes) -> Trace``; None for an archive of several traces (the ranks of
    one job), which its readers expand first"""


STREAMSCOPE = Format("streamscope", "a Streamscope trace", read.claims, read.read_trace)
KINETO = Format("torch.profiler", "a torch.profiler (Kineto) trace", kineto.claims, kineto.load)
RANK_ZIP = Format("rank-zip", "a zip of rank files", lambda head: head.zip, None)

FORMATS: tuple[Format, ...] = (STREAMSCOPE, KINETO, RANK_ZIP)
"""Every format Streamscope reads; the first that claims a file reads it."""

UNKNOWN = f"not a trace file: Streamscope reads {', '.join(f.what for f in FORMATS[:-1])} or {FORMATS[-1].what}"


def recognise(head: Head) -> Format | None:
    """The first format that claims ``head``, or None."""
    return next((f for f in FORMATS if f.claims(head)), None)


def detect(path: str | os.PathLike[str]) -> Format:
    """The format of the file at ``path``. Raises TraceFileError (one line, starting with the path) for a
    file that cannot be read, is empty, or that no format claims."""
    name = os.fspath(path)
    try:
        head = read_head(path)
    except TraceFileError as exc:
        raise TraceFileError(f"{name}: {exc}") from None
    if not head.raw:
        raise TraceFileError(f"{name}: the file is empty")
    found = recognise(head)
    if found is None:
        raise TraceFileError(f"{name}: {UNKNOWN}")
    return found


def format_of(path: str | os.PathLike[str]) -> Format | None:
    """:func:`detect` without the error: None for a file that cannot be read or no format claims."""
    try:
        return detect(path)
    except TraceFileError:
        return None


def is_trace_like(head: Head) -> bool:
    """Whether a file found among others (a folder of samples, the members of a zip) is to be read as one
    trace: a single-trace format claims it, or it is gzip or JSON that none claims, so that a damaged trace
    is reported rather than passed over."""
    found = recognise(head)
    if found is not None:
        return found.load is not None
    return head.gzip or head.text.lstrip()[:1] in (b"{", b"[")
