"""Our trace file and the generic Chrome Trace Event table: read, write, validate. Imports only collector.model."""

from __future__ import annotations

from collector.traceformat.events import EventTable, read_events
from collector.traceformat.read import read_trace
from collector.traceformat.spec import STREAMSCOPE_KEY, TraceFileError
from collector.traceformat.write import write_trace

__all__ = ["STREAMSCOPE_KEY", "EventTable", "TraceFileError", "read_events", "read_trace", "write_trace"]
