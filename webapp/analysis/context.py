"""One pass over the run DataFrame: interval classes, step windows and the unions every metric needs.

:func:`prepare` turns a Trace into :class:`RunData`: numpy arrays on one time axis for all ranks
(webapp.analysis.intervals.Timebase), the step windows (webapp.analysis.steps) and the unions of GPU,
compute, copy, host and sync time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from collector.importers.collectives import is_host_collective
from collector.importers.kineto_lanes import per_category
from collector.model import (
    COPY_CODES,
    GPU_CODES,
    INTERVAL_KIND_DTYPE,
    KIND_CODE,
    MEMORY_CODE,
    MEMORY_KIND_DTYPE,
    IntervalKind,
    Trace,
)
from webapp.analysis import intervals as iv
from webapp.analysis.steps import step_windows

COPY_SYNC_CAUSES = frozenset({"blocking_copy", "memcpy", "copy"})
"""Sync causes that are a blocking copy's own wait (judged by the copy rules, not sync-in-loop)."""


def _codes(col: pd.Series, dtype: pd.CategoricalDtype) -> np.ndarray:
    if not isinstance(col.dtype, pd.CategoricalDtype) or list(col.dtype.categories) != list(dtype.categories):
        col = col.astype(str).astype(dtype)
    return np.asarray(col.cat.codes, dtype=np.int16)


def codes_mask(codes: np.ndarray, wanted: Iterable[int]) -> np.ndarray:
    """Whether each IntervalKind code (-1: none) is one of ``wanted``, through a table of the codes: one bool
    per row, where np.isin makes several run-long temporaries."""
    table = np.zeros(len(INTERVAL_KIND_DTYPE.categories) + 1, dtype=bool)  # the last entry is code -1's
    table[list(wanted)] = True
    return table[codes]


def kind_mask(codes: np.ndarray, *kinds: IntervalKind) -> np.ndarray:
    return codes_mask(codes, [KIND_CODE[k] for k in kinds])


@dataclass(frozen=True)
class RunData:
    """Arrays for the analysis. ``s``/``e`` are interval start/end on the shared axis, row-aligned with
    ``trace.intervals``; ``win*`` describe the step windows (sorted along the axis)."""

    trace: Trace
    tb: iv.Timebase
    kind: np.ndarray  # IntervalKind codes
    mem: np.ndarray  # MemoryKind codes
    rank: np.ndarray
    s: np.ndarray
    e: np.ndarray
    win: iv.Segments
    win_rank: np.ndarray
    win_step: np.ndarray
    win_start_ns: np.ndarray  # run clock
    win_end_ns: np.ndarray
    gpu: iv.Segments
    gpu_first: np.ndarray  # row of the interval that opens each GPU busy segment
    compute: iv.Segments
    copy: iv.Segments
    host: iv.Segments  # cpu_op, launch and sync_wait
    sync: iv.Segments  # every sync_wait
    ids: np.ndarray  # interval ids (the "id" column)
    ids_are_rows: bool  # ids == 0..n-1, so an id is its row
    win_row: np.ndarray  # step window of each row (by its start), -1 outside every window
    gpu_mask: np.ndarray
    copy_mask: np.ndarray
    sync_mask: np.ndarray
    step_basis: str  # how windows were placed: see webapp.analysis.steps.step_windows

    def code(self, kind: IntervalKind) -> int:
        return KIND_CODE[kind]

    def mem_code(self, memory: str) -> int:
        return MEMORY_CODE[memory]

    def positive_note(self, key: str) -> float | None:
        """A positive number among the trace's notes (``host_cpus``, ``recorder_call_ns``), None where the note
        is absent or not such a number."""
        value = (self.trace.meta.notes or {}).get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None

    def win_of(self, t_axis: np.ndarray) -> np.ndarray:
        return iv.window_index(self.win, t_axis)

    def rows_of_ids(self, wanted: np.ndarray) -> np.ndarray:
        """Row of each interval id in ``wanted`` (-1 where there is none)."""
        wanted = np.asarray(wanted, dtype=np.int64)
        n = len(self.ids)
        if self.ids_are_rows:
            return np.where((wanted >= 0) & (wanted < n), wanted, -1)
        if not n:
            return np.full(len(wanted), -1, dtype=np.int64)
        order = np.argsort(self.ids, kind="stable")
        pos = np.minimum(np.searchsorted(self.ids[order], wanted), n - 1)
        return np.where(self.ids[order][pos] == wanted, order[pos], -1)

    def ints(self, column: str, rows: np.ndarray | None = None) -> np.ndarray:
        """An integer column of the run DataFrame (at ``rows``: positions or a mask; all rows if None) as int64;
        only the rows asked for are converted (``step`` and ``lane`` are int32)."""
        values = np.asarray(self.trace.intervals[column])
        return (values if rows is None else values[np.asarray(rows)]).astype(np.int64, copy=False)

    def strings(self, column: str, rows: np.ndarray) -> np.ndarray:
        """A text column of the run DataFrame at ``rows``, as an object array of str ('' for missing), read
        through the categorical codes (no conversion of the whole column)."""
        col = self.trace.intervals[column]
        if isinstance(col.dtype, pd.CategoricalDtype):
            cats = np.array([str(c) for c in col.cat.categories] + [""], dtype=object)
            codes = np.asarray(col.cat.codes)[np.asarray(rows, dtype=np.int64)]
            return cats[np.where(codes >= 0, codes, len(cats) - 1)]
        return col.iloc[rows].astype(str).to_numpy(dtype=object)

    def matches(self, column: str, rows: np.ndarray, pred: Callable[[str], bool]) -> np.ndarray:
        """Whether the text of ``column`` at each row satisfies ``pred`` (asked once per distinct value)."""
        col = self.trace.intervals[column]
        if not isinstance(col.dtype, pd.CategoricalDtype):
            return np.array([pred(str(v)) for v in col.iloc[rows]], dtype=bool)
        ok = np.array([pred(str(c)) for c in col.cat.categories] + [pred("")], dtype=bool)
        codes = np.asarray(col.cat.codes)[np.asarray(rows, dtype=np.int64)]
        return ok[np.where(codes >= 0, codes, len(ok) - 1)]

    def step_win(self, rows: np.ndarray) -> np.ndarray:
        """Step window of each row by its ``step`` tag (the step whose marker held its host call), else by its
        start; -1 outside every window. Host work of a step issued before its GPU window opens counts there."""
        rows = np.asarray(rows, dtype=np.int64)
        by_time = self.win_row[rows]
        if not len(self.win) or not len(rows):
            return by_time
        tag = self.ints("step", rows)
        tagged = np.flatnonzero(tag >= 0)
        span = int(self.win_step.max()) + 2
        key = self.win_rank * span + self.win_step
        order = np.argsort(key, kind="stable")
        want = self.rank[rows[tagged]] * span + tag[tagged]
        pos = np.minimum(np.searchsorted(key[order], want), len(key) - 1)
        hit = key[order][pos] == want
        by_time[tagged[hit]] = order[pos[hit]]
        return by_time

    def codes_of(self, column: str) -> tuple[np.ndarray, list[str]]:
        """Category codes and categories (as str) of a categorical column of the run DataFrame."""
        col = self.trace.intervals[column]
        if not isinstance(col.dtype, pd.CategoricalDtype):
            col = col.astype(str).astype("category")
        return np.asarray(col.cat.codes), [str(c) for c in col.cat.categories]


def _on_kernel_lanes(trace: Trace, compute_mask: np.ndarray) -> np.ndarray:
    """Whether each row is on a lane that runs kernels or memsets (``compute_mask``)."""
    lane = np.asarray(trace.intervals["lane"])  # int32, read as it is: no run-long int64 copy
    runs_kernels = np.zeros(len(trace.lanes) + 1, dtype=bool)  # the last entry is lane -1's
    runs_kernels[lane[compute_mask]] = True
    runs_kernels[-1] = False
    return runs_kernels[lane]


def _gpu_busy_rows(trace: Trace, kind: np.ndarray, gpu_mask: np.ndarray) -> np.ndarray:
    """Rows that make the GPU busy: GPU work but never a collective that a host thread runs (gloo, MPI, UCC);
    none at all in a run whose only stream work is collectives (CPU ranks)."""
    collective = kind == KIND_CODE[IntervalKind.COLLECTIVE]
    if not collective.any():
        return gpu_mask
    if not (gpu_mask & ~collective).any():
        return np.zeros(len(kind), dtype=bool)
    return gpu_mask & ~(collective & per_category(trace.intervals["name"], is_host_collective, bool, False))


def prepare(trace: Trace) -> RunData:
    """Build RunData. Raises ValueError for a run that cannot be placed on one axis."""
    df = trace.intervals
    kind = _codes(df["kind"], INTERVAL_KIND_DTYPE)
    mem = _codes(df["memory_kind"], MEMORY_KIND_DTYPE)
    rank = np.asarray(df["rank"], dtype=np.int64)
    start = np.asarray(df["start_ns"], dtype=np.int64)
    end = np.maximum(np.asarray(df["end_ns"], dtype=np.int64), start)  # its own array: placed on the axis in place
    gpu_mask = codes_mask(kind, GPU_CODES)
    compute_mask = kind_mask(kind, IntervalKind.KERNEL, IntervalKind.MEMSET)
    on_compute_lanes = gpu_mask & _on_kernel_lanes(trace, compute_mask)
    steps, step_basis = step_windows(trace, kind, rank, start, end, gpu_mask, on_compute_lanes)
    lo = int(start.min()) if len(start) else 0
    hi = int(end.max()) if len(end) else 0
    if len(steps):
        lo, hi = min(lo, int(steps["start_ns"].min())), max(hi, int(steps["end_ns"].max()))
    max_rank = int(max(rank.max() if len(rank) else 0, steps["rank"].max() if len(steps) else 0))
    if len(rank) and rank.min() < 0:
        raise ValueError("intervals with a negative rank cannot be analysed")
    tb = iv.Timebase.fit(lo, hi, max_rank)
    ids = np.asarray(df["id"], dtype=np.int64)
    s, e = tb.to_axis(rank, start), tb.to_axis_in_place(rank, end)
    wr = steps["rank"].to_numpy(np.int64)
    ws = tb.to_axis(wr, steps["start_ns"].to_numpy(np.int64))
    we = tb.to_axis(wr, steps["end_ns"].to_numpy(np.int64))
    if len(ws) > 1:  # overlapping step markers: trim each window at the next one's start
        we = np.minimum(we, np.concatenate((ws[1:], [we[-1]])))
    win = iv.Segments.from_sorted(ws, np.maximum(we, ws))

    copy_mask = codes_mask(kind, COPY_CODES)
    host_mask = kind_mask(kind, IntervalKind.CPU_OP, IntervalKind.LAUNCH, IntervalKind.SYNC_WAIT)
    sync_mask = kind == KIND_CODE[IntervalKind.SYNC_WAIT]
    gpu, gpu_first = iv.union_where(s, e, _gpu_busy_rows(trace, kind, gpu_mask))
    return RunData(
        trace=trace,
        tb=tb,
        kind=kind,
        mem=mem,
        rank=rank,
        s=s,
        e=e,
        win=win,
        win_rank=wr,
        win_step=steps["step"].to_numpy(np.int64),
        win_start_ns=steps["start_ns"].to_numpy(np.int64),
        win_end_ns=steps["end_ns"].to_numpy(np.int64),
        gpu=gpu,
        gpu_first=gpu_first,
        compute=iv.union_where(s, e, compute_mask)[0],
        copy=iv.union_where(s, e, copy_mask)[0],
        host=iv.union_where(s, e, host_mask)[0],
        sync=iv.union_where(s, e, sync_mask)[0],
        ids=ids,
        ids_are_rows=bool(len(ids) == 0 or (ids[0] == 0 and ids[-1] == len(ids) - 1 and (ids[1:] > ids[:-1]).all())),
        win_row=iv.window_index(win, s),
        gpu_mask=gpu_mask,
        copy_mask=copy_mask,
        sync_mask=sync_mask,
        step_basis=step_basis,
    )
