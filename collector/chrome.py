"""Read any Chrome Trace Event JSON file (ours or torch.profiler's) into a columnar event table.

This is the one parser under both our own format (collector.tracefile) and the torch.profiler importer
(collector.kineto). It returns the top-level object (everything but ``traceEvents``) and an
:class:`EventTable`: one row per event, with the ``args`` fields we use pulled into typed columns.

Event table columns (EVENT_COLUMNS; missing values are -1, "" or False):

==================== ========= ==============================================================
ph, cat, name        category  Chrome phase, category, event name
pid, tid             int64     Chrome process / thread (non-integer ids map to negative ints,
                               see EventTable.id_names)
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
==================== ========= ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

DEFAULT_MAX_INFLATED_BYTES = 8 * 1024**3
"""A .json.gz that inflates past this many bytes is refused as a likely gzip bomb (configurable)."""

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
}


class TraceFileError(ValueError):
    """A trace file that cannot be read; the message is one line a user can act on."""


@dataclass
class EventTable:
    """A parsed Chrome trace: ``top`` is the top-level object without ``traceEvents``."""

    top: dict[str, Any]
    events: pd.DataFrame
    id_names: dict[int, str] = field(default_factory=dict)


def read_events(path: str, *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> EventTable:
    """Parse a ``.json`` or ``.json.gz`` Chrome trace. Raises TraceFileError with a one-line message."""
    raise NotImplementedError("the fast reader lands with the file-format work")
