"""Load any trace a user hands us, whatever its format: the format registry (collector.importers.registry)
recognises the file by its first bytes and its importer reads it.

This sits above the file format and the importers, so neither depends on the other.
"""

from __future__ import annotations

import os

from collector.importers.registry import detect
from collector.model import Trace
from collector.steps import find_steps
from collector.traceformat.spec import DEFAULT_MAX_INFLATED_BYTES, TraceFileError

NO_EVENTS = "no GPU or CPU events in the trace"


def load_trace(
    path: str | os.PathLike[str],
    *,
    max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES,
    step_at: str | None = None,
) -> Trace:
    """Read the trace at ``path`` with the importer of its format (ours, torch.profiler, ...; see
    collector.importers.registry) and find its steps (collector.steps.find_steps; ``step_at`` is the user's
    ``--step-at``).

    Raises TraceFileError (one line, starting with the path) for a file of no format we read, a bad file, an
    archive of several traces, a trace without intervals (:data:`NO_EVENTS`) or a ``step_at`` that matches
    nothing.
    """
    name = os.fspath(path)
    found = detect(path)
    if found.load is None:
        raise TraceFileError(
            f"{name}: {found.what}, not one trace: give it where the ranks of a job are read "
            "(streamscope merge or analyze, or the multi-rank upload)"
        )
    try:
        trace = found.load(name, max_inflated_bytes=max_inflated_bytes)
    except TraceFileError as exc:
        text = str(exc)
        raise TraceFileError(text if text.startswith(name) else f"{name}: {text}") from None
    if trace.intervals.empty:
        raise TraceFileError(f"{name}: {NO_EVENTS}")
    try:
        return find_steps(trace, step_at)
    except ValueError as exc:
        raise TraceFileError(f"{name}: {exc}") from None
