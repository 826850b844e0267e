"""Load any trace a user hands us: our own file, or a torch.profiler (Kineto) trace through its importer.

This sits above the file format and the importers, so neither depends on the other.
"""

from __future__ import annotations

import os

from collector.importers.collectives import mark_host_collectives
from collector.importers.kineto import trace_from_kineto
from collector.model import Trace
from collector.steps import find_steps
from collector.traceformat.events import read_events
from collector.traceformat.read import from_table, is_streamscope
from collector.traceformat.spec import DEFAULT_MAX_INFLATED_BYTES, TraceFileError

NO_EVENTS = "no GPU or CPU events in the trace"


def load_trace(
    path: str | os.PathLike[str],
    *,
    max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES,
    step_at: str | None = None,
) -> Trace:
    """Read our trace file, or import a torch.profiler (Kineto) Chrome trace, whichever ``path`` holds, and
    find its steps (collector.steps.find_steps; ``step_at`` is the user's ``--step-at``).

    Raises TraceFileError (one line, starting with the path) for a bad file, a trace without intervals
    (:data:`NO_EVENTS`) or a ``step_at`` that matches nothing.
    """
    name = os.fspath(path)
    table = read_events(path, max_inflated_bytes=max_inflated_bytes)
    try:
        trace = from_table(table, name) if is_streamscope(table) else mark_host_collectives(trace_from_kineto(table))
    except TraceFileError as exc:
        text = str(exc)
        raise TraceFileError(text if text.startswith(name) else f"{name}: {text}") from None
    del table
    if trace.intervals.empty:
        raise TraceFileError(f"{name}: {NO_EVENTS}")
    try:
        return find_steps(trace, step_at)
    except ValueError as exc:
        raise TraceFileError(f"{name}: {exc}") from None
