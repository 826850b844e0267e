"""The Streamscope trace model, defined once and used by collector, importers, analysis, web and tests.

A run is a :class:`Trace`: run metadata, the lanes (one CPU thread or CUDA stream of one rank), the
intervals on those lanes and the markers (step boundaries, instant user marks).

Intervals and markers are held as pandas DataFrames whose columns, dtypes and units are declared here
once (:data:`INTERVAL_COLUMNS`, :data:`MARKER_COLUMNS`). The interval frame *is* the run DataFrame: one
table for the whole run, all ranks, with the lane's rank, kind, stream and label denormalised into it.
Times are int64 nanoseconds on one clock per run; repeated strings are categoricals, so ten million
intervals take well under 1 GB.
"""

from __future__ import annotations

import enum
import functools
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

FORMAT_VERSION = 1
"""Version of our trace file format (docs/trace-format.md). Bump on incompatible changes."""


class LaneKind(str, enum.Enum):
    """What a lane is: a host thread or a CUDA stream labelled by its role."""

    CPU_THREAD = "cpu_thread"
    COMPUTE_STREAM = "compute_stream"
    TRANSFER_STREAM = "transfer_stream"
    COMM_STREAM = "comm_stream"
    OTHER_STREAM = "other_stream"

    @property
    def is_gpu(self) -> bool:
        return self is not LaneKind.CPU_THREAD


class IntervalKind(str, enum.Enum):
    """What an interval is. GPU kinds live on stream lanes, host kinds on CPU-thread lanes."""

    KERNEL = "kernel"
    MEMCPY_H2D = "memcpy_h2d"
    MEMCPY_D2H = "memcpy_d2h"
    MEMCPY_D2D = "memcpy_d2d"
    MEMSET = "memset"
    CPU_OP = "cpu_op"
    LAUNCH = "launch"
    SYNC_WAIT = "sync_wait"
    COLLECTIVE = "collective"
    ANNOTATION = "annotation"
    SAMPLE = "sample"  # host thread: a stretch over which its sampled Python stack (the name) stayed the same


COPY_KINDS = (IntervalKind.MEMCPY_H2D, IntervalKind.MEMCPY_D2H, IntervalKind.MEMCPY_D2D)
GPU_KINDS = (*COPY_KINDS, IntervalKind.KERNEL, IntervalKind.MEMSET, IntervalKind.COLLECTIVE)
HOST_KINDS = (IntervalKind.CPU_OP, IntervalKind.LAUNCH, IntervalKind.SYNC_WAIT)


class MemoryKind(str, enum.Enum):
    """Host memory behind a copy (``""`` where it does not apply or is unknown)."""

    NONE = ""
    PINNED = "pinned"
    PAGEABLE = "pageable"
    DEVICE = "device"


class MarkerKind(str, enum.Enum):
    STEP = "step"  # one step of the loop, [start_ns, end_ns)
    MARK = "mark"  # an instant user mark (start_ns == end_ns)


NO_STEP = -1
NO_LAUNCH = -1


@dataclass(frozen=True)
class Lane:
    """One timeline lane: a host thread or a CUDA stream of one rank.

    ``ident`` is the CUDA stream id (for stream lanes) or the OS thread id (for CPU lanes); a lane of a
    thread's Python stacks has :func:`stack_lane_ident` of the thread's id.
    """

    rank: int
    kind: LaneKind
    ident: int
    label: str


def stack_lane_ident(tid: int) -> int:
    """The ident of the lane that holds thread ``tid``'s Python stacks (sampled or traced): minus its id, below
    every id for thread 0."""
    return -tid if tid else -(2**31 - 1)


@dataclass(frozen=True)
class Interval:
    """One interval on a lane; the row form of the run DataFrame, for producers and tests.

    ``launch_id`` is the ``id`` of the CPU ``launch``/``cpu_op`` interval that queued this GPU work.
    ``source`` is ``file:line`` of the user's code where known. ``cause`` says why a ``sync_wait`` waited
    (``item``, ``synchronize``, ...). ``non_blocking`` records what a copy asked for.
    """

    lane: int  # index into Trace.lanes
    kind: IntervalKind
    name: str
    start_ns: int
    end_ns: int
    bytes: int = 0
    memory_kind: MemoryKind = MemoryKind.NONE
    non_blocking: bool = False
    step: int = NO_STEP
    source: str = ""
    cause: str = ""
    launch_id: int = NO_LAUNCH
    group: str = ""
    id: int = -1  # -1: assigned in order by Trace.build


@dataclass(frozen=True)
class Marker:
    rank: int
    kind: MarkerKind
    name: str
    start_ns: int
    end_ns: int
    step: int = NO_STEP


@dataclass(frozen=True)
class RunMeta:
    """Run metadata. Unknown keys in a file land in ``notes``; missing ones take these defaults."""

    format_version: int = FORMAT_VERSION
    streamscope_version: str = ""
    created: str = ""  # ISO 8601, UTC
    host: str = ""
    device_name: str = ""
    device_properties: Mapping[str, Any] = field(default_factory=dict)
    torch_version: str = ""
    cuda_version: str = ""
    workload: str = ""  # what ran: "demo:naive", "train.py --lr 3e-4", ...
    source: str = "recorded"  # recorded | demo | torch.profiler | synthetic | ...
    world_size: int = 1
    clock: str = "host_monotonic_ns"  # which clock start_ns/end_ns are on
    command: str = ""
    bandwidth_probe: Mapping[str, float] = field(default_factory=dict)  # e.g. {"h2d_pinned_gbps": 53.7}
    error: str = ""  # set when the recorded workload raised
    step_method: str = ""  # how the steps were found (collector.steps): markers, optimizer, repeat:cpu_op, ...
    notes: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def new(cls, **values: Any) -> RunMeta:
        """Metadata stamped with this version, the current UTC time and this host."""
        from collector import __version__

        base = {
            "streamscope_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(),
        }
        return cls(**{**base, **values})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunMeta:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        if extra:
            values["notes"] = {**dict(values.get("notes") or {}), **extra}
        return cls(**values)


# ---------------------------------------------------------------------------------------------------
# Columns of the run DataFrame, declared once. (name, dtype, unit / meaning)
# ---------------------------------------------------------------------------------------------------

LANE_KIND_DTYPE = pd.CategoricalDtype([k.value for k in LaneKind])
INTERVAL_KIND_DTYPE = pd.CategoricalDtype([k.value for k in IntervalKind])
MEMORY_KIND_DTYPE = pd.CategoricalDtype([k.value for k in MemoryKind])
MARKER_KIND_DTYPE = pd.CategoricalDtype([k.value for k in MarkerKind])

# The code maps, once: a categorical column's codes index its dtype's categories, so vectorized rules compare
# codes. A str enum member is its value, so ``KIND_CODE[IntervalKind.KERNEL]`` and ``KIND_CODE["kernel"]`` agree.
KIND_NAMES: tuple[str, ...] = tuple(INTERVAL_KIND_DTYPE.categories)
"""IntervalKind values by code (the ``kind`` column's codes, and every ``kind`` code array, index this)."""
KIND_CODE: dict[str, int] = {k: i for i, k in enumerate(KIND_NAMES)}
"""IntervalKind value -> its code in INTERVAL_KIND_DTYPE."""
MEMORY_CODE: dict[str, int] = {k: i for i, k in enumerate(MEMORY_KIND_DTYPE.categories)}
"""MemoryKind value -> its code in MEMORY_KIND_DTYPE."""
COPY_CODES: tuple[int, ...] = tuple(KIND_CODE[k] for k in COPY_KINDS)
"""Codes of the copy kinds (COPY_KINDS)."""
GPU_CODES: tuple[int, ...] = tuple(KIND_CODE[k] for k in GPU_KINDS)
"""Codes of the kinds that run on a GPU stream (GPU_KINDS: copies, kernels, memsets, collectives)."""
LANE_KIND_CODE: dict[str, int] = {k: i for i, k in enumerate(LANE_KIND_DTYPE.categories)}
"""LaneKind value -> its code in LANE_KIND_DTYPE (also the order lane kinds are declared in)."""

INTERVAL_COLUMNS: dict[str, tuple[Any, str]] = {
    "id": ("int64", "interval id, unique in the run"),
    "rank": ("int32", "distributed rank"),
    "lane": ("int32", "index into Trace.lanes"),
    "lane_kind": (LANE_KIND_DTYPE, "role of the lane (LaneKind)"),
    "stream": ("int64", "CUDA stream id, or OS thread id for CPU lanes"),
    "lane_label": ("category", "lane label shown in the timeline"),
    "kind": (INTERVAL_KIND_DTYPE, "IntervalKind"),
    "name": ("category", "op, kernel or annotation name"),
    "start_ns": ("int64", "start, ns on the run clock"),
    "end_ns": ("int64", "end, ns on the run clock"),
    "dur_ns": ("int64", "end_ns - start_ns, ns"),
    "bytes": ("int64", "bytes moved or set (copies, memsets; a collective's larger message); 0 otherwise"),
    "memory_kind": (MEMORY_KIND_DTYPE, "host memory of a copy (MemoryKind)"),
    "non_blocking": ("bool", "copy asked for non_blocking=True"),
    "step": ("int32", "step index, -1 outside steps"),
    "source": ("category", "user source file:line, '' if unknown"),
    "cause": ("category", "why a sync_wait waited ('item', 'synchronize', ...), '' otherwise"),
    "launch_id": ("int64", "id of the CPU interval that queued this GPU work, -1 if none"),
    "group": ("category", "process group of a collective ('default_pg (pg 0)'), '' otherwise or unknown"),
}

MARKER_COLUMNS: dict[str, tuple[Any, str]] = {
    "rank": ("int32", "distributed rank"),
    "kind": (MARKER_KIND_DTYPE, "MarkerKind"),
    "name": ("object", "marker name"),
    "step": ("int32", "step index, -1 for marks"),
    "start_ns": ("int64", "start, ns on the run clock"),
    "end_ns": ("int64", "end, ns (== start_ns for instant marks)"),
}

_ROW_FIELDS = [f.name for f in fields(Interval) if f.name != "lane"]


def empty_markers() -> pd.DataFrame:
    """A markers frame of no rows (MARKER_COLUMNS)."""
    return _no_markers().copy()


@functools.cache
def _no_markers() -> pd.DataFrame:
    return conform_markers(pd.DataFrame({c: [] for c in MARKER_COLUMNS}))


def step_at(markers: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Step number (int32) whose step marker's [start_ns, end_ns) holds each time in ``t`` (ns), else NO_STEP.

    ``markers`` has MARKER_COLUMNS; marks (instants) are ignored.
    """
    steps = markers[markers["kind"] == MarkerKind.STEP.value].sort_values("start_ns")
    if steps.empty:
        return np.full(len(t), NO_STEP, dtype=np.int32)
    starts, ends = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t < ends[np.maximum(i, 0)])
    return np.where(ok, steps["step"].to_numpy()[np.maximum(i, 0)], NO_STEP).astype(np.int32)


def _conform(
    frame: pd.DataFrame, columns: Mapping[str, tuple[Any, str]], defaults: Mapping[str, Any] | None = None
) -> pd.DataFrame:
    """A new frame of exactly ``columns``, in order, each with its dtype: a column ``frame`` lacks takes its
    value in ``defaults``. Built from arrays in one go: on the few-thousand-row frames of a short recording,
    pandas' per-column conversions and insertions cost more than the data."""
    n = len(frame)
    if not frame.index.equals(pd.RangeIndex(n)):
        frame = frame.reset_index(drop=True)
    out = {}
    for name, (dtype, _) in columns.items():
        if name in frame:
            out[name] = _typed(frame[name], dtype)
        else:
            out[name] = _constant((defaults or {})[name], dtype, n)
    return pd.DataFrame(out, copy=False)  # one block per column: consolidating would copy every column


def _typed(col: pd.Series, dtype: Any) -> Any:
    """``col``'s values as ``dtype``: ``col`` itself where it has it (shared until written: copy-on-write), else
    a new array (a fixed categorical in ``dtype``'s codes; ``"category"`` made of anything else's strings)."""
    if isinstance(dtype, pd.CategoricalDtype):
        return col if _same_categories(col, dtype) else _recoded(col, dtype).array
    if dtype == "category":
        if isinstance(col.dtype, pd.CategoricalDtype):
            return col
        codes, labels = pd.factorize(col if pd.api.types.is_string_dtype(col) else col.astype(str), sort=True)
        return pd.Categorical.from_codes(codes, categories=pd.Index(labels))  # str categories, as astype gives
    if dtype == "object":  # kept as objects (an array of strings would be read as pandas' string dtype)
        return pd.Series(col.to_numpy(object), dtype=object)
    if str(col.dtype) != str(dtype):
        return col.astype(dtype)
    return col


def _constant(value: Any, dtype: Any, n: int) -> Any:
    """``n`` copies of ``value`` as an array of ``dtype``."""
    if isinstance(dtype, pd.CategoricalDtype):
        return pd.Categorical.from_codes(np.full(n, dtype.categories.get_loc(value), dtype=np.int8), dtype=dtype)
    if dtype == "category":
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([value]))
    return np.full(n, value, dtype=dtype)


def _same_categories(col: pd.Series, dtype: pd.CategoricalDtype) -> bool:
    """``col`` already has ``dtype``'s categories in its order (so its codes mean the same)."""
    have = col.dtype
    return (
        isinstance(have, pd.CategoricalDtype)
        and have.ordered == dtype.ordered
        and have.categories.dtype == dtype.categories.dtype
        and have.categories.equals(dtype.categories)
    )


def _recoded(col: pd.Series, dtype: pd.CategoricalDtype) -> pd.Series:
    """``col`` with ``dtype``'s categories and codes. (``astype`` keeps a categorical's own order when its
    categories are the same set, and code-based rules would then read the wrong kind.)"""
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return col.astype(dtype)
    where = dtype.categories.get_indexer(col.cat.categories)
    codes = col.cat.codes.to_numpy()
    new = np.where(codes >= 0, where[np.maximum(codes, 0)], -1) if len(where) else np.full(len(codes), -1)
    return pd.Series(pd.Categorical.from_codes(new, dtype=dtype), index=col.index, name=col.name)


INTERVAL_DEFAULTS: dict[str, Any] = {
    "bytes": 0,
    "memory_kind": "",
    "non_blocking": False,
    "step": NO_STEP,
    "source": "",
    "cause": "",
    "launch_id": NO_LAUNCH,
    "group": "",
    "lane_label": "",
    "stream": 0,
    "rank": 0,
}
"""Values of the optional INTERVAL_COLUMNS where a frame lacks them."""


def conform_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``frame`` with exactly INTERVAL_COLUMNS, in order, with their dtypes.

    Missing optional columns get defaults; ``dur_ns`` is recomputed. Raises ValueError on a column that
    cannot be converted.
    """
    frame = frame.copy(deep=False)
    if "id" not in frame:
        frame["id"] = np.arange(len(frame), dtype=np.int64)
    frame["dur_ns"] = frame["end_ns"].to_numpy(np.int64) - frame["start_ns"].to_numpy(np.int64)
    return _conform(frame, INTERVAL_COLUMNS, INTERVAL_DEFAULTS)


def conforms(frame: pd.DataFrame) -> bool:
    """True when ``frame`` already has INTERVAL_COLUMNS' names, order and dtypes, so that
    :func:`conform_intervals` (which copies) can be skipped. A ``"category"`` column may hold any categories;
    a column of fixed categories must hold them in the model's order (pandas calls two unordered categorical
    dtypes equal whatever their order, but the codes would then mean other kinds)."""
    if list(frame.columns) != list(INTERVAL_COLUMNS):
        return False
    for name, (dtype, _) in INTERVAL_COLUMNS.items():
        col = frame[name]
        if isinstance(dtype, pd.CategoricalDtype):
            if not _same_categories(col, dtype):
                return False
        elif dtype == "category":
            if not isinstance(col.dtype, pd.CategoricalDtype):
                return False
        elif str(col.dtype) != str(dtype):
            return False
    return True


def conformed(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` itself where it already has INTERVAL_COLUMNS' names, order and dtypes and a plain row index
    (a frame its caller has just built and owns: no copy), else :func:`conform_intervals` of it."""
    if conforms(frame) and frame.index.equals(pd.RangeIndex(len(frame))):
        return frame
    return conform_intervals(frame)


def conform_markers(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``frame`` with exactly MARKER_COLUMNS, in order, with their dtypes."""
    return _conform(frame, MARKER_COLUMNS, {"step": NO_STEP})


@dataclass(frozen=True)
class Trace:
    """A whole run: metadata, lanes, intervals (the run DataFrame) and markers.

    Build one with :meth:`Trace.build` from row objects, or directly from frames that have been through
    :func:`conform_intervals` / :func:`conform_markers`.
    """

    meta: RunMeta
    lanes: tuple[Lane, ...]
    intervals: pd.DataFrame
    markers: pd.DataFrame

    @classmethod
    def build(
        cls,
        meta: RunMeta,
        lanes: Sequence[Lane],
        intervals: Iterable[Interval],
        markers: Iterable[Marker] = (),
    ) -> Trace:
        lanes = tuple(lanes)
        rows = list(intervals)
        for row in rows:
            if not 0 <= row.lane < len(lanes):
                raise ValueError(f"interval {row.name!r} refers to lane {row.lane}, which does not exist")
        cols: dict[str, Any] = {name: [getattr(r, name) for r in rows] for name in _ROW_FIELDS}
        lane_idx = np.array([r.lane for r in rows], dtype=np.int32)
        cols["lane"] = lane_idx
        cols["rank"] = np.array([lanes[i].rank for i in lane_idx], dtype=np.int32)
        cols["lane_kind"] = [lanes[i].kind.value for i in lane_idx]
        cols["stream"] = np.array([lanes[i].ident for i in lane_idx], dtype=np.int64)
        cols["lane_label"] = [lanes[i].label for i in lane_idx]
        cols["kind"] = [IntervalKind(k).value for k in cols["kind"]]
        cols["memory_kind"] = [MemoryKind(k).value for k in cols["memory_kind"]]
        ids = np.array(cols["id"], dtype=np.int64)
        if len(ids) and (ids < 0).any():
            ids = np.where(ids < 0, np.arange(len(ids)), ids)
        cols["id"] = ids
        frame = conform_intervals(pd.DataFrame(cols) if rows else pd.DataFrame({c: [] for c in INTERVAL_COLUMNS}))
        mrows = list(markers)
        mframe = (
            conform_markers(pd.DataFrame([{**asdict(m), "kind": MarkerKind(m.kind).value} for m in mrows]))
            if mrows
            else empty_markers()
        )
        return cls(meta, lanes, frame, mframe)

    def with_meta(self, **changes: Any) -> Trace:
        return replace(self, meta=replace(self.meta, **changes))

    @property
    def ranks(self) -> list[int]:
        return sorted({lane.rank for lane in self.lanes})

    def steps(self) -> pd.DataFrame:
        """Step markers only: columns rank, step, start_ns, end_ns, sorted by rank then step."""
        m = self.markers
        steps = m[m["kind"] == MarkerKind.STEP.value][["rank", "step", "start_ns", "end_ns"]]
        return steps.sort_values(["rank", "step"]).reset_index(drop=True)


def describe_columns() -> str:
    """Markdown table of the run DataFrame's columns, as docs/trace-format.md shows it (a test keeps them equal)."""
    lines = ["| column | dtype | meaning |", "|---|---|---|"]
    for name, (dtype, meaning) in INTERVAL_COLUMNS.items():
        shown = "category" if isinstance(dtype, pd.CategoricalDtype) else dtype
        lines.append(f"| `{name}` | {shown} | {meaning} |")
    return "\n".join(lines)
