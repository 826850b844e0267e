"""Event tables as the recorder's CUPTI capture makes them, built call by call, for tests and benchmarks.

:class:`EventRows` takes host API calls (on a thread) and the GPU work they launch (on a stream, sharing the
call's correlation id), in ns on one clock, and :meth:`EventRows.table` gives the event table the Kineto
importer reads (collector.recording.client_capture's layout).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from collector.traceformat.events import EventTable

PID = 4000
"""The process id host rows carry (GPU rows carry the device)."""


class EventRows:
    """Rows of an event table under construction."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, int, int, int, int, int, int]] = []
        """(cat, name, pid, tid or stream, start, end, correlation, bytes)."""
        self.corr = 0

    def call(self, thread: int, name: str, start: int, dur: int = 4_000) -> int:
        """A CUDA runtime call (``cu...``: a driver call) on ``thread``; returns its correlation id."""
        self.corr += 1
        cat = "cuda_driver" if name.startswith("cu") and not name.startswith("cuda") else "cuda_runtime"
        self.rows.append((cat, name, PID, thread, start, start + dur, self.corr, 0))
        return self.corr

    def op(self, thread: int, name: str, start: int, end: int) -> None:
        """An ``aten::`` op named while naming was on (``cpu_op``, no correlation)."""
        self.rows.append(("cpu_op", name, PID, thread, start, end, -1, 0))

    def gpu(self, cat: str, name: str, stream: int, start: int, dur: int, corr: int, nbytes: int = 0) -> int:
        """GPU work (``kernel``, ``gpu_memcpy``, ``gpu_memset``) on device 0's ``stream``; returns its end."""
        self.rows.append((cat, name, 0, stream, start, start + dur, corr, nbytes))
        return start + dur

    def table(self) -> EventTable:
        """The event table of the rows so far, in start order."""
        from collector.recording.kineto_capture import columns_table

        rows = self.rows
        cat, name, pid, tid, start, end, corr, nbytes = (list(c) for c in zip(*rows, strict=True)) if rows else [[]] * 8
        order = np.argsort(np.asarray(start, dtype=np.int64), kind="stable")
        gpu = np.asarray(pid, dtype=np.int64)[order] != PID

        def col(values: list[Any]) -> np.ndarray:
            return np.asarray(values, dtype=np.int64)[order]

        cols = {
            "ph": pd.Categorical(["X"] * len(rows)),
            "cat": pd.Categorical(np.asarray(cat, dtype=object)[order]),
            "name": pd.Categorical(np.asarray(name, dtype=object)[order]),
            "pid": col(pid),
            "tid": col(tid),
            "ts_ns": col(start),
            "dur_ns": col(end) - col(start),
            "arg_stream": np.where(gpu, col(tid), -1),
            "arg_device": np.where(gpu, 0, -1),
            "arg_correlation": col(corr),
            "arg_bytes": col(nbytes),
        }
        return columns_table(cols, len(rows))
