"""The first stages of the torch.profiler (Kineto) importer: the event table as arrays, and the launch links.

:class:`KinetoEvents` holds the columns every later stage reads (phase, category, thread, times, names) and
selects complete (``X``) events by category. :class:`Launches` links GPU work and ``cuda_sync`` events to the
host API call that queued them: by ``args.correlation``, else by the ``ac2g`` flow whose end sits on the
event. Used by :mod:`collector.importers.kineto` and :mod:`collector.importers.kineto_sync`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import cat_in, lookup_first, rank_of
from collector.traceformat.events import EventTable
from collector.traceformat.spec import TraceFileError

LEGACY_CATS = {
    "Kernel": "kernel",
    "Memcpy": "gpu_memcpy",
    "Memset": "gpu_memset",
    "Runtime": "cuda_runtime",
    "Driver": "cuda_driver",
    "Operator": "cpu_op",
    "User annotation": "user_annotation",
    "Python": "python_function",
}
"""Categories of traces from older torch.profiler releases, and the names they have now."""
HOST_API_CATS = ("cuda_runtime", "cuda_driver")
"""Categories of the host's CUDA API calls: launches, copies, syncs."""
NEEDED = (
    "ph",
    "cat",
    "name",
    "pid",
    "tid",
    "ts_ns",
    "dur_ns",
    "flow_id",
    "arg_name",
    "arg_stream",
    "arg_device",
    "arg_correlation",
    "arg_bytes",
    "arg_python_id",
    "arg_python_parent_id",
    "arg_group",
)
"""Event-table columns the importer reads."""


def _categorical(col: pd.Series) -> pd.Series:
    return col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")


def by_name(codes: np.ndarray, categories: pd.Index, fn: Callable[[str], Any], dtype: Any) -> np.ndarray:
    """fn applied once per distinct name among ``codes`` (name codes of some rows), spread to those rows."""
    if len(codes) == 0:
        return np.array([], dtype=dtype)
    shifted = codes.astype(np.int64) + 1  # 0: no name
    present = np.flatnonzero(np.bincount(shifted, minlength=len(categories) + 1))
    values = np.empty(len(categories) + 1, dtype=dtype)
    values[present] = [fn(str(categories[c - 1]) if c > 0 else "") for c in present]
    return values[shifted]


def _current_cats(cat: pd.Series) -> pd.Series:
    """The ``cat`` categorical with LEGACY_CATS renamed (a category already present keeps its rows)."""
    old = [c for c in cat.cat.categories if c in LEGACY_CATS and LEGACY_CATS[c] not in cat.cat.categories]
    return cat.cat.rename_categories({c: LEGACY_CATS[c] for c in old}) if old else cat


@dataclass(frozen=True)
class KinetoEvents:
    """One rank's event table as the importer's stages read it. A *row* is a position in ``table.events``."""

    table: EventTable
    rank: int
    world_size: int
    complete: np.ndarray
    """bool per row: a complete (``X``) event, the only ones that become intervals."""
    cat: pd.Series
    """the ``cat`` column as a categorical"""
    pid: np.ndarray
    tid: np.ndarray
    thread: np.ndarray
    """(pid, tid) as one int64 key per row"""
    start: np.ndarray
    """``ts_ns``, int64 ns"""
    end: np.ndarray
    """``ts_ns + max(dur_ns, 0)``, int64 ns"""
    name_codes: np.ndarray
    names: pd.Index
    """the categories ``name_codes`` index"""

    @classmethod
    def read(cls, table: EventTable, source_name: str = "") -> KinetoEvents:
        """The arrays of ``table``; TraceFileError (one line) when it lacks the event-table columns."""
        ev = table.events
        missing = [c for c in NEEDED if c not in ev.columns]
        if missing:
            raise TraceFileError(f"{source_name or 'trace'}: event table lacks columns {', '.join(missing)}")
        rank, world_size = rank_of(table.top)
        pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
        start = ev["ts_ns"].to_numpy(np.int64)
        names = _categorical(ev["name"])
        return cls(
            table=table,
            rank=rank,
            world_size=world_size,
            complete=cat_in(ev["ph"], ("X",)),
            cat=_current_cats(_categorical(ev["cat"])),
            pid=pid,
            tid=tid,
            thread=(pid.astype(np.int64) << 32) | (tid.astype(np.int64) & 0xFFFFFFFF),
            start=start,
            end=start + np.maximum(ev["dur_ns"].to_numpy(np.int64), 0),
            name_codes=names.cat.codes.to_numpy(),
            names=names.cat.categories,
        )

    @property
    def ev(self) -> pd.DataFrame:
        return self.table.events

    def rows(self, cats: tuple[str, ...]) -> np.ndarray:
        """The complete events in these categories, in file order."""
        return np.flatnonzero(self.complete & cat_in(self.cat, cats))

    def by_name(self, rows: np.ndarray, fn: Callable[[str], Any], dtype: Any) -> np.ndarray:
        """``fn`` of each row's name, called once per distinct name."""
        return by_name(self.name_codes[rows], self.names, fn, dtype)

    def correlation(self, rows: np.ndarray, phase: str) -> np.ndarray:
        """Each row's correlation id: ``args.correlation``, else the id of the ``ac2g`` flow whose ``phase``
        end (``s`` on the API call, ``f`` on the GPU work) sits on the row's (pid, tid, ts); else -1."""
        corr = self.ev["arg_correlation"].to_numpy()[rows].astype(np.int64)
        lacking = corr < 0
        if lacking.any():
            corr[lacking] = self._flow_ids(rows[lacking], phase)
        return corr

    def _flow_ids(self, rows: np.ndarray, phase: str) -> np.ndarray:
        ev = self.ev
        flows = ev[cat_in(ev["ph"], (phase,)) & cat_in(ev["cat"], ("ac2g",))][["pid", "tid", "ts_ns", "flow_id"]]
        if flows.empty or len(rows) == 0:
            return np.full(len(rows), -1, dtype=np.int64)
        left = ev[["pid", "tid", "ts_ns"]].iloc[rows].reset_index(drop=True)
        hit = left.merge(flows.drop_duplicates(["pid", "tid", "ts_ns"]), how="left", on=["pid", "tid", "ts_ns"])
        return hit["flow_id"].fillna(-1).to_numpy(dtype=np.int64)


@dataclass(frozen=True)
class Launches:
    """The host API calls (``cuda_runtime`` / ``cuda_driver`` rows) and their correlation ids. A *launch
    position* is a position in ``rows``: the interval rows start with these calls, in this order."""

    rows: np.ndarray
    correlation: np.ndarray

    @classmethod
    def of(cls, events: KinetoEvents) -> Launches:
        rows = events.rows(HOST_API_CATS)
        return cls(rows, events.correlation(rows, "s"))

    def position(self, correlation: np.ndarray) -> np.ndarray:
        """The launch position of the call with each correlation id, -1 where none has it."""
        return lookup_first(self.correlation, correlation)
