"""Load any trace a user hands us: our own file, or a torch.profiler (Kineto) trace through its importer.

This sits above the file format and the importers, so neither depends on the other.
"""

from __future__ import annotations

import os

from collector.importers.kineto import trace_from_kineto
from collector.model import Trace
from collector.traceformat.events import read_events
from collector.traceformat.read import from_table, is_streamscope
from collector.traceformat.spec import DEFAULT_MAX_INFLATED_BYTES, TraceFileError


def load_trace(path: str | os.PathLike[str], *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> Trace:
    """Read our trace file, or import a torch.profiler (Kineto) Chrome trace, whichever ``path`` holds."""
    table = read_events(path, max_inflated_bytes=max_inflated_bytes)
    if is_streamscope(table):
        return from_table(table, os.fspath(path))
    try:
        return trace_from_kineto(table)
    except TraceFileError as exc:
        text = str(exc)
        raise TraceFileError(text if text.startswith(os.fspath(path)) else f"{os.fspath(path)}: {text}") from None
