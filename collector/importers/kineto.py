"""Import torch.profiler (Kineto) Chrome traces (PyTorch 2.0 and later) into a Streamscope :class:`Trace`.

Input: an :class:`~collector.traceformat.events.EventTable` (``collector.traceformat.events.read_events``).
One file is one rank.
What becomes what:

========================================== ==========================================================
``kernel``                                 ``kernel`` (``collective`` when the name contains "nccl")
``gpu_memcpy``                             ``memcpy_h2d/d2h/d2d``; memory kind from the name
                                           ("Memcpy HtoD (Pageable -> Device)"), bytes from ``args.bytes``
``gpu_memset``                             ``memset``
``cuda_runtime`` / ``cuda_driver``         ``launch``, or ``sync_wait`` (see :mod:`collector.importers.kineto_sync`)
``cpu_op``                                 ``cpu_op``
``user_annotation``, ``gpu_user_annotation`` ``annotation``; ``ProfilerStep#N`` ranges -> step markers
unknown categories with a thread or stream ``annotation``; the rest (``python_function``, ``Trace``,
                                           flows, metadata, instants) is used or skipped, never fatal
========================================== ==========================================================

GPU lanes: one per (device, stream), role from content: only copies/memsets -> transfer, only NCCL
kernels -> comm, any other kernel -> compute. CPU lanes: one per (pid, tid). A GPU interval's
``launch_id`` is the id of the runtime call with its correlation id (``ac2g`` flows when args lack it);
its ``step`` is its launch's step. Times stay on Kineto's clock, in int64 ns (the same clock on every rank
of one job). Vectorized throughout: no Python loop over events.

Stages (:func:`trace_from_kineto` runs them in this order): the event table as arrays and the host API
calls with their correlation ids (:mod:`~collector.importers.kineto_events`); step markers from
``ProfilerStep#N``; GPU work, its kinds and launch links; the host calls that waited and why
(:func:`~collector.importers.kineto_sync.host_waits`); the rows and their lanes; the interval frame (order,
ids, launch ids, steps); the run metadata (:func:`~collector.importers.kineto_lanes.run_meta`).

Limits: sync sources name the user's *function* and the line where it starts (torch.profiler records no
call lines); without ``with_stack=True`` sources are empty. Pre-2.0 category names ("Kernel", "Runtime",
"Operator") are not recognised. Each file is one rank; merge ranks downstream.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from collector.importers.collectives import mark_host_collectives
from collector.importers.frames import concat_keeping_codes, renumber_by_start
from collector.importers.graphs import mark_graph_replays
from collector.importers.kineto_events import HOST_API_CATS, KinetoEvents, Launches
from collector.importers.kineto_lanes import (
    BYTES_KIND_CODES,
    backward_rows,
    build_lanes,
    cat_in,
    per_lane,
    run_meta,
)
from collector.importers.kineto_stacks import stack_rows, stack_stretches
from collector.importers.kineto_sync import HostWaits, host_waits, py_frames
from collector.model import (
    INTERVAL_KIND_DTYPE,
    KIND_CODE,
    LANE_KIND_CODE,
    LANE_KIND_DTYPE,
    MEMORY_CODE,
    MEMORY_KIND_DTYPE,
    NO_LAUNCH,
    Lane,
    MarkerKind,
    Trace,
    conform_intervals,
    conform_markers,
    conformed,
    empty_markers,
    step_at,
)
from collector.traceformat.events import EventTable, read_events
from collector.traceformat.gather import take_all
from collector.traceformat.grouping import group_numbers
from collector.traceformat.head import Head
from collector.traceformat.spec import DEFAULT_MAX_INFLATED_BYTES

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
USED_ELSEWHERE = ("python_function", "cuda_sync", "ac2g", "Trace")
KNOWN_CATS = (*GPU_CATS, *HOST_API_CATS, *USED_ELSEWHERE, "cpu_op", "user_annotation")

_MEMCPY = re.compile(r"Memcpy (?P<dir>\w+) \((?P<src>\w+) -> (?P<dst>\w+)\)")
_STEP = re.compile(r"ProfilerStep#\d+")
_DIRECTION = {"HtoD": "memcpy_h2d", "DtoH": "memcpy_d2h", "DtoD": "memcpy_d2d", "PtoP": "memcpy_d2d"}


def claims(head: Head) -> bool:
    """A torch.profiler trace, or any Chrome trace JSON that is not ours: an object with ``traceEvents`` or
    Kineto's ``schemaVersion`` among its opening keys, or an array of events."""
    return head.json_array or "traceEvents" in head.keys or "schemaVersion" in head.keys


def load(path: str | os.PathLike[str], *, max_inflated_bytes: int = DEFAULT_MAX_INFLATED_BYTES) -> Trace:
    """The trace of the torch.profiler file at ``path``, with host-run collectives marked (gloo, MPI) and CUDA
    graph replays under their spans (collector.importers.graphs)."""
    trace = trace_from_kineto(read_events(path, max_inflated_bytes=max_inflated_bytes), source_name=os.fspath(path))
    return mark_graph_replays(mark_host_collectives(trace))


def trace_from_kineto(table: EventTable, *, source_name: str = "", by_start: bool = False) -> Trace:
    """Turn a parsed torch.profiler Chrome trace into a :class:`Trace` (one rank). See the module docstring.

    Rows (and ids) are in lane order, then by start (longest first among equal starts); with ``by_start``
    by start, then lane, as the recorder keeps them.
    Raises TraceFileError (one line) when the table lacks the event-table columns.
    """
    events = KinetoEvents.read(table, source_name)
    steps, ops, annotations = _steps(events)
    launches = Launches.of(events)
    gpu = _gpu_work(events, launches)
    copies = gpu.is_copy & (gpu.launch >= 0)
    waits = host_waits(
        events,
        launches,
        ops,
        copies=np.unique(gpu.launch[copies]),
        pageable=gpu.launch[copies & (gpu.memory == MEMORY_CODE["pageable"])],
    )
    rows = _rows(events, launches, gpu, waits, ops, annotations)
    frame, lanes = conformed(_intervals(events, rows, gpu, waits, steps, by_start)), rows.lanes
    stretches = stack_stretches(py_frames(events), events.names)
    if len(stretches):  # with_stack=True: where the host's time went, by Python frame
        more, lanes = stack_rows(stretches, lanes, events.rank, steps, len(frame))
        frame = concat_keeping_codes(frame, more)
        frame = conform_intervals(renumber_by_start(frame) if by_start else frame)
    first_ns = int(events.start.min()) if len(events.start) else None
    meta = run_meta(table.top, source_name, events.world_size, events.rank, rows.unknown_cats, rows.devices, first_ns)
    return Trace(meta, lanes, frame, steps)


# ------------------------------------------------------------------------------------- steps


def _steps(events: KinetoEvents) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Step markers from the ``ProfilerStep#N`` ranges (``cpu_op`` in older releases, ``user_annotation`` in
    newer ones), and the other ``cpu_op`` and ``user_annotation`` rows."""
    rows = events.rows(("cpu_op", "user_annotation"))
    number = events.by_name(rows, lambda c: int(c[13:]) if _STEP.fullmatch(c) else -1, np.int64)
    steps = _step_ranges(events, rows, number)
    cats = events.cat.iloc[rows]
    ops = rows[(number < 0) & cat_in(cats, ("cpu_op",))]
    annotations = rows[(number < 0) & cat_in(cats, ("user_annotation",))]
    return steps, ops, annotations


def _step_ranges(events: KinetoEvents, rows: np.ndarray, numbers: np.ndarray) -> pd.DataFrame:
    """Step markers (MARKER_COLUMNS) from the ``ProfilerStep#N`` range events at ``rows``."""
    keep = numbers >= 0
    rows, numbers = rows[keep], numbers[keep]
    if len(rows) == 0:
        return empty_markers()
    steps = pd.DataFrame(
        {
            "rank": events.rank,
            "kind": MarkerKind.STEP.value,
            "name": [f"ProfilerStep#{n}" for n in numbers],
            "step": numbers,
            "start_ns": events.start[rows],
            "end_ns": events.end[rows],
        }
    )
    return conform_markers(steps.sort_values("start_ns").drop_duplicates("step"))


# ---------------------------------------------------------------------------------- GPU work


def memcpy_kind(name: str) -> tuple[str, str]:
    """``"Memcpy HtoD (Pageable -> Device)"`` -> ``("memcpy_h2d", "pageable")``; unknown -> ``("", "")``."""
    m = _MEMCPY.search(name)
    if m is None or m.group("dir") not in _DIRECTION:
        return "", ""
    kind = _DIRECTION[m.group("dir")]
    host = {"memcpy_h2d": m.group("src"), "memcpy_d2h": m.group("dst")}.get(kind, "Device").lower()
    return kind, host if host in MEMORY_CODE else ""


@dataclass(frozen=True)
class _GpuWork:
    """The GPU events (``GPU_CATS`` rows) with their interval kind, memory kind and launch (arrays by row)."""

    rows: np.ndarray
    launch: np.ndarray
    """launch position of the API call that queued it, -1 for none (GPU-side ranges were not launched)"""
    kind: np.ndarray
    """int8 code into INTERVAL_KIND_DTYPE (``annotation`` for ranges and unrecognised copies)"""
    memory: np.ndarray
    """int8 code into MEMORY_KIND_DTYPE"""
    is_copy: np.ndarray


def _gpu_work(events: KinetoEvents, launches: Launches) -> _GpuWork:
    rows = events.rows(GPU_CATS)
    cat = events.cat
    cat_of = cat.cat.codes.to_numpy()[rows]
    is_ = {c: cat_of == (cat.cat.categories.get_loc(c) if c in cat.cat.categories else -2) for c in GPU_CATS}
    launch = np.full(len(rows), -1, dtype=np.int64)
    work = ~is_["gpu_user_annotation"]
    launch[work] = launches.position(events.correlation(rows[work], "f"))
    kind = np.full(len(rows), KIND_CODE["annotation"], dtype=np.int8)
    memory = np.zeros(len(rows), dtype=np.int8)
    k, m = is_["kernel"], is_["gpu_memcpy"]
    nccl = events.by_name(rows[k], lambda c: "nccl" in c.lower(), bool)
    kind[k] = np.where(nccl, KIND_CODE["collective"], KIND_CODE["kernel"])
    kind[m] = events.by_name(rows[m], lambda c: KIND_CODE.get(memcpy_kind(c)[0], KIND_CODE["annotation"]), np.int8)
    memory[m] = events.by_name(rows[m], lambda c: MEMORY_CODE[memcpy_kind(c)[1]], np.int8)
    kind[is_["gpu_memset"]] = KIND_CODE["memset"]
    memory[is_["gpu_memset"]] = MEMORY_CODE["device"]
    return _GpuWork(rows, launch, kind, memory, m & (kind != KIND_CODE["annotation"]))


# ------------------------------------------------------------------------------ rows and lanes


@dataclass(frozen=True)
class _Rows:
    """The event row of every interval, host rows first (the API calls leading, so that a launch position
    is a position here too), then the GPU rows; with each one's kind and lane."""

    rows: np.ndarray
    n_host: int
    kinds: np.ndarray
    lane: np.ndarray
    lanes: tuple[Lane, ...]
    unknown_cats: pd.Series
    """the categories of the rows read as annotations because their category is unknown (for the metadata)"""
    devices: list[int]
    """the GPU devices with work, sorted"""


def _rows(
    events: KinetoEvents,
    launches: Launches,
    gpu: _GpuWork,
    waits: HostWaits,
    ops: np.ndarray,
    annotations: np.ndarray,
) -> _Rows:
    ev = events.ev
    # unknown categories become annotations on their thread or stream
    unknown = events.complete & ~cat_in(events.cat, KNOWN_CATS)
    stream_arg = ev["arg_stream"].to_numpy(np.int64)
    unk_gpu = np.flatnonzero(unknown & (stream_arg >= 0))
    unk_cpu = np.flatnonzero(unknown & (stream_arg < 0) & (events.pid >= 0) & (events.tid >= 0))

    host_rows = np.concatenate([launches.rows, ops, annotations, unk_cpu])
    gpu_rows = np.concatenate([gpu.rows, unk_gpu])
    rows = np.concatenate([host_rows, gpu_rows])
    nh, nr = len(host_rows), len(host_rows) + len(gpu_rows)
    kinds = np.concatenate(
        [
            np.where(waits.cause != "", KIND_CODE["sync_wait"], KIND_CODE["launch"]).astype(np.int8),
            np.full(len(ops), KIND_CODE["cpu_op"], np.int8),
            np.full(len(annotations) + len(unk_cpu), KIND_CODE["annotation"], np.int8),
            gpu.kind,
            np.full(len(unk_gpu), KIND_CODE["annotation"], np.int8),
        ]
    )
    # a host lane per (pid, tid); a GPU lane per (device, stream)
    device_arg = ev["arg_device"].to_numpy(np.int64)[gpu_rows]
    is_gpu = np.arange(nr) >= nh
    stream = stream_arg[gpu_rows]
    lane_a = np.concatenate([events.pid[host_rows], np.where(device_arg >= 0, device_arg, events.pid[gpu_rows])])
    lane_b = np.concatenate(
        [
            events.tid[host_rows],
            np.where(stream >= 0, stream, _named_id(events.tid[gpu_rows], events.table.id_names)),
        ]
    )
    lane = group_numbers(is_gpu, lane_a, lane_b)
    lanes = build_lanes(ev, events.rank, lane, is_gpu, lane_a, lane_b, kinds, backward_rows(ev, rows))
    devices = sorted(pd.unique(lane_a[is_gpu]).tolist())
    return _Rows(rows, nh, kinds, lane, tuple(lanes), events.cat[unknown], devices)


def _named_id(values: np.ndarray, id_names: Mapping[int, str]) -> np.ndarray:
    """Negative ids stand for names ("stream 7"); recover the number where the name ends in one."""
    out = values.astype(np.int64).copy()
    for neg in np.unique(out[out < 0]):
        m = re.search(r"(\d+)\s*$", id_names.get(int(neg), ""))
        if m:
            out[out == neg] = int(m.group(1))
    return out


# --------------------------------------------------------------------------------- intervals


def _intervals(
    events: KinetoEvents, r: _Rows, gpu: _GpuWork, waits: HostWaits, steps: pd.DataFrame, by_start: bool
) -> pd.DataFrame:
    """The interval frame (INTERVAL_COLUMNS, typed as conformed): rows ordered (and ids given) by lane then
    start, or by start then lane; each GPU interval linked to its launch and in the step that launched it."""
    ev, rows, nh, kinds, lane = events.ev, r.rows, r.n_host, r.kinds, r.lane
    nr, ng = len(rows), len(gpu.rows)
    start, end = events.start, events.end
    launch_at = np.full(nr, -1, dtype=np.int64)
    launch_at[nh : nh + ng] = gpu.launch  # a launch position is a row position (the calls lead the rows)
    linked = launch_at >= 0
    step = step_at(steps, start[rows])
    step[linked] = step[launch_at[linked]]  # GPU work belongs to the step that launched it
    order = start_order(start[rows], lane, end[rows]) if by_start else np.lexsort((-end[rows], start[rows], lane))
    new_id = np.empty(nr, dtype=np.int64)
    new_id[order] = np.arange(nr)
    launch_id = np.where(linked, new_id[np.maximum(launch_at, 0)], NO_LAUNCH)

    non_blocking = np.zeros(nr, dtype=bool)
    linked_g = np.flatnonzero(gpu.launch >= 0)
    non_blocking[nh + linked_g] = gpu.is_copy[linked_g] & waits.non_blocking[gpu.launch[linked_g]]
    # copies, memsets and collectives; host annotations too: gloo's collectives are host ranges
    is_gpu = np.arange(nr) >= nh
    has_bytes = (np.isin(kinds, BYTES_KIND_CODES) & is_gpu) | (kinds == KIND_CODE["annotation"])
    nbytes = np.where(has_bytes, np.maximum(ev["arg_bytes"].to_numpy(np.int64)[rows], 0), 0)
    group_codes = np.where(kinds == KIND_CODE["collective"], ev["arg_group"].cat.codes.to_numpy()[rows], 0)
    mem = np.zeros(nr, dtype=np.int8)
    mem[nh : nh + ng] = np.where(gpu.kind == KIND_CODE["annotation"], 0, gpu.memory)
    sync_pos = np.full(nr, -1, dtype=np.int64)
    sync_pos[waits.waits] = np.arange(len(waits.waits))  # launch positions are row positions
    lane_o, row_o, sync_o, kinds_o, bytes_o, mem_o, non_blocking_o, step_o, launch_o, group_o = take_all(
        [(a, order) for a in (lane, rows, sync_pos, kinds, nbytes, mem, non_blocking, step, launch_id, group_codes)]
    )
    lanes = r.lanes
    lane_kinds = np.array([LANE_KIND_CODE[ln.kind] for ln in lanes], dtype=np.int8)
    start_o, end_o, name_o, stream_o, lane_kind_o = take_all(
        [
            (start, row_o),
            (end, row_o),
            (events.name_codes, row_o),
            (np.array([ln.ident for ln in lanes], dtype=np.int64), lane_o),
            (lane_kinds, lane_o),
        ]
    )
    where_sync = np.flatnonzero(sync_o >= 0)
    return pd.DataFrame(
        {
            "id": np.arange(nr, dtype=np.int64),
            "rank": np.full(nr, events.rank, dtype=np.int32),
            "lane": lane_o,
            "lane_kind": pd.Categorical.from_codes(lane_kind_o, dtype=LANE_KIND_DTYPE),
            "stream": stream_o,
            "lane_label": per_lane([ln.label for ln in lanes], lane_o),
            "kind": pd.Categorical.from_codes(kinds_o, dtype=INTERVAL_KIND_DTYPE),
            "name": used_categories(name_o, events.names),
            "start_ns": start_o,
            "end_ns": end_o,
            "dur_ns": end_o - start_o,
            "bytes": bytes_o,
            "memory_kind": pd.Categorical.from_codes(mem_o, dtype=MEMORY_KIND_DTYPE),
            "non_blocking": non_blocking_o,
            "step": step_o,
            "source": _sparse_strings(nr, where_sync, waits.sources[sync_o[where_sync]]),
            "cause": _sparse_strings(nr, where_sync, waits.cause[waits.waits][sync_o[where_sync]]),
            "launch_id": launch_o,
            "group": pd.Categorical.from_codes(group_o, categories=ev["arg_group"].cat.categories),
        },
        copy=False,  # one block per column: consolidating would copy every column
    )


def start_order(start: np.ndarray, lane: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The order of rows by start, then lane, then longest first: a stable sort of the starts (rows come in
    a few runs already in time order, which it merges), then equal starts put in lane and length order."""
    order = np.argsort(start, kind="stable")
    s = start[order]
    tied = np.flatnonzero(s[1:] == s[:-1])
    if len(tied):
        at = np.unique(np.concatenate([tied, tied + 1]))  # every row of every run of equal starts
        sub = order[at]
        order[at] = sub[np.lexsort((-end[sub], lane[sub], start[sub]))]
    return order


def used_categories(codes: np.ndarray, categories: pd.Index) -> pd.Categorical:
    """``pd.Categorical.from_codes(codes, categories)`` without the categories no row uses (counted, not
    sorted: ``remove_unused_categories`` sorts every code)."""
    used = np.bincount(codes[codes >= 0], minlength=len(categories)) > 0 if len(codes) else np.zeros(0, bool)
    if used.all() and len(used) == len(categories):
        return pd.Categorical.from_codes(codes, categories=categories)
    keep = np.flatnonzero(used)
    remap = np.full(len(categories) + 1, -1, dtype=codes.dtype if codes.dtype.kind == "i" else np.int64)
    remap[keep] = np.arange(len(keep))
    return pd.Categorical.from_codes(remap[codes], categories=categories[keep])


def _sparse_strings(n: int, positions: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """A categorical of ``n`` empty strings with ``values`` at ``positions`` (cheap for sparse columns)."""
    vocab, codes_at = np.unique(np.asarray(values, dtype=str), return_inverse=True)
    categories = ["", *[v for v in vocab if v != ""]]
    remap = np.array([categories.index(v) for v in vocab], dtype=np.int32)
    codes = np.zeros(n, dtype=np.int32)
    codes[positions] = remap[codes_at] if len(vocab) else 0
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories))
