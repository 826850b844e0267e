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

Limits: sync sources name the user's *function* and the line where it starts (torch.profiler records no
call lines); without ``with_stack=True`` sources are empty. Pre-2.0 category names ("Kernel", "Runtime",
"Operator") are not recognised. Each file is one rank; merge ranks downstream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import (
    BYTES_KIND_CODES,
    build_lanes,
    cat_in,
    lookup_first,
    per_lane,
    rank_of,
    run_meta,
)
from collector.importers.kineto_sync import (
    CAUSE_BY_OP,
    CUDA_SYNC_EVENT_CAUSE,
    PyFrames,
    api_sync_cause,
    is_async_copy_api,
    outermost_enclosing,
    python_sources,
)
from collector.model import (
    INTERVAL_KIND_DTYPE,
    KIND_CODE,
    LANE_KIND_CODE,
    LANE_KIND_DTYPE,
    MEMORY_CODE,
    MEMORY_KIND_DTYPE,
    NO_LAUNCH,
    MarkerKind,
    Trace,
    conform_intervals,
    conform_markers,
    empty_markers,
    step_at,
)
from collector.traceformat.events import EventTable
from collector.traceformat.gather import take_all
from collector.traceformat.grouping import group_numbers
from collector.traceformat.spec import TraceFileError

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
HOST_API_CATS = ("cuda_runtime", "cuda_driver")
USED_ELSEWHERE = ("python_function", "cuda_sync", "ac2g", "Trace")
KNOWN_CATS = (*GPU_CATS, *HOST_API_CATS, *USED_ELSEWHERE, "cpu_op", "user_annotation")

_MEMCPY = re.compile(r"Memcpy (?P<dir>\w+) \((?P<src>\w+) -> (?P<dst>\w+)\)")
_STEP = re.compile(r"ProfilerStep#\d+")
_DIRECTION = {"HtoD": "memcpy_h2d", "DtoH": "memcpy_d2h", "DtoD": "memcpy_d2d", "PtoP": "memcpy_d2d"}
_NEEDED = (
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


def memcpy_kind(name: str) -> tuple[str, str]:
    """``"Memcpy HtoD (Pageable -> Device)"`` -> ``("memcpy_h2d", "pageable")``; unknown -> ``("", "")``."""
    m = _MEMCPY.search(name)
    if m is None or m.group("dir") not in _DIRECTION:
        return "", ""
    kind = _DIRECTION[m.group("dir")]
    host = {"memcpy_h2d": m.group("src"), "memcpy_d2h": m.group("dst")}.get(kind, "Device").lower()
    return kind, host if host in MEMORY_CODE else ""


def _by_name(codes: np.ndarray, categories: pd.Index, fn: Callable[[str], Any], dtype: Any) -> np.ndarray:
    """fn applied once per distinct name among ``codes`` (name codes of some rows), spread to those rows."""
    if len(codes) == 0:
        return np.array([], dtype=dtype)
    shifted = codes.astype(np.int64) + 1  # 0: no name
    present = np.flatnonzero(np.bincount(shifted, minlength=len(categories) + 1))
    values = np.empty(len(categories) + 1, dtype=dtype)
    values[present] = [fn(str(categories[c - 1]) if c > 0 else "") for c in present]
    return values[shifted]


def _flow_ids(ev: pd.DataFrame, rows: np.ndarray, phase: str) -> np.ndarray:
    """``ac2g`` flow id whose ``phase`` end sits on each row's (pid, tid, ts), or -1."""
    flows = ev[cat_in(ev["ph"], (phase,)) & cat_in(ev["cat"], ("ac2g",))][["pid", "tid", "ts_ns", "flow_id"]]
    if flows.empty or len(rows) == 0:
        return np.full(len(rows), -1, dtype=np.int64)
    left = ev[["pid", "tid", "ts_ns"]].iloc[rows].reset_index(drop=True)
    hit = left.merge(flows.drop_duplicates(["pid", "tid", "ts_ns"]), how="left", on=["pid", "tid", "ts_ns"])
    return hit["flow_id"].fillna(-1).to_numpy(dtype=np.int64)


def _correlation(ev: pd.DataFrame, rows: np.ndarray, phase: str) -> np.ndarray:
    corr = ev["arg_correlation"].to_numpy()[rows].astype(np.int64)
    lacking = corr < 0
    if lacking.any():
        corr[lacking] = _flow_ids(ev, rows[lacking], phase)
    return corr


def _step_ranges(ev: pd.DataFrame, rows: np.ndarray, numbers: np.ndarray, rank: int) -> pd.DataFrame:
    """Step markers (MARKER_COLUMNS) from the ``ProfilerStep#N`` range events at ``rows``."""
    keep = numbers >= 0
    rows, numbers = rows[keep], numbers[keep]
    if len(rows) == 0:
        return empty_markers()
    start = ev["ts_ns"].to_numpy(np.int64)[rows]
    steps = pd.DataFrame(
        {
            "rank": rank,
            "kind": MarkerKind.STEP.value,
            "name": [f"ProfilerStep#{n}" for n in numbers],
            "step": numbers,
            "start_ns": start,
            "end_ns": start + np.maximum(ev["dur_ns"].to_numpy(np.int64)[rows], 0),
        }
    )
    return conform_markers(steps.sort_values("start_ns").drop_duplicates("step"))


def _sparse_strings(n: int, positions: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """A categorical of ``n`` empty strings with ``values`` at ``positions`` (cheap for sparse columns)."""
    vocab, codes_at = np.unique(np.asarray(values, dtype=str), return_inverse=True)
    categories = ["", *[v for v in vocab if v != ""]]
    remap = np.array([categories.index(v) for v in vocab], dtype=np.int32)
    codes = np.zeros(n, dtype=np.int32)
    codes[positions] = remap[codes_at] if len(vocab) else 0
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories))


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


def _thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    return (pid.astype(np.int64) << 32) | (tid.astype(np.int64) & 0xFFFFFFFF)


def _named_id(values: np.ndarray, id_names: Mapping[int, str]) -> np.ndarray:
    """Negative ids stand for names ("stream 7"); recover the number where the name ends in one."""
    out = values.astype(np.int64).copy()
    for neg in np.unique(out[out < 0]):
        m = re.search(r"(\d+)\s*$", id_names.get(int(neg), ""))
        if m:
            out[out == neg] = int(m.group(1))
    return out


def trace_from_kineto(table: EventTable, *, source_name: str = "", by_start: bool = False) -> Trace:
    """Turn a parsed torch.profiler Chrome trace into a :class:`Trace` (one rank). See the module docstring.

    Rows (and ids) are in lane order, then by start (longest first among equal starts); with ``by_start``
    by start, then lane, as the recorder keeps them.
    Raises TraceFileError (one line) when the table lacks the event-table columns.
    """
    ev = table.events
    missing = [c for c in _NEEDED if c not in ev.columns]
    if missing:
        raise TraceFileError(f"{source_name or 'trace'}: event table lacks columns {', '.join(missing)}")
    rank, world_size = rank_of(table.top)
    ph_x = cat_in(ev["ph"], ("X",))
    cat = ev["cat"] if isinstance(ev["cat"].dtype, pd.CategoricalDtype) else ev["cat"].astype("category")
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + np.maximum(ev["dur_ns"].to_numpy(np.int64), 0)
    names = ev["name"] if isinstance(ev["name"].dtype, pd.CategoricalDtype) else ev["name"].astype("category")
    ncodes, ncats = names.cat.codes.to_numpy(), names.cat.categories
    key = _thread_key(pid, tid)

    def by_name(rows: np.ndarray, fn: Callable[[str], Any], dtype: Any) -> np.ndarray:
        return _by_name(ncodes[rows], ncats, fn, dtype)

    # --- steps: ProfilerStep#N ranges (cpu_op in older releases, user_annotation in newer ones) -------
    oa_rows = np.flatnonzero(ph_x & cat_in(cat, ("cpu_op", "user_annotation")))
    step_no = by_name(oa_rows, lambda c: int(c[13:]) if _STEP.fullmatch(c) else -1, np.int64)
    steps = _step_ranges(ev, oa_rows, step_no, rank)
    op_rows = oa_rows[(step_no < 0) & cat_in(cat.iloc[oa_rows], ("cpu_op",))]
    ann_rows = oa_rows[(step_no < 0) & cat_in(cat.iloc[oa_rows], ("user_annotation",))]

    # --- GPU work and its launch links ---------------------------------------------------------------
    api_rows = np.flatnonzero(ph_x & cat_in(cat, HOST_API_CATS))
    gpu_ev = np.flatnonzero(ph_x & cat_in(cat, GPU_CATS))
    corr_r = _correlation(ev, api_rows, "s")

    def launch_of(corr: np.ndarray) -> np.ndarray:
        return lookup_first(corr_r, corr)

    cat_of_gpu = cat.cat.codes.to_numpy()[gpu_ev]
    g_is = {c: cat_of_gpu == (cat.cat.categories.get_loc(c) if c in cat.cat.categories else -2) for c in GPU_CATS}
    launch_pos_g = np.full(len(gpu_ev), -1, dtype=np.int64)
    work = ~g_is["gpu_user_annotation"]  # GPU-side ranges were not launched by one call
    launch_pos_g[work] = launch_of(_correlation(ev, gpu_ev[work], "f"))
    kind_g = np.full(len(gpu_ev), KIND_CODE["annotation"], dtype=np.int8)
    mem_g = np.zeros(len(gpu_ev), dtype=np.int8)
    k, m = g_is["kernel"], g_is["gpu_memcpy"]
    kind_g[k] = np.where(
        by_name(gpu_ev[k], lambda c: "nccl" in c.lower(), bool), KIND_CODE["collective"], KIND_CODE["kernel"]
    )
    kind_g[m] = by_name(gpu_ev[m], lambda c: KIND_CODE.get(memcpy_kind(c)[0], KIND_CODE["annotation"]), np.int8)
    mem_g[m] = by_name(gpu_ev[m], lambda c: MEMORY_CODE[memcpy_kind(c)[1]], np.int8)
    kind_g[g_is["gpu_memset"]] = KIND_CODE["memset"]
    mem_g[g_is["gpu_memset"]] = MEMORY_CODE["device"]
    is_copy_g = m & (kind_g != KIND_CODE["annotation"])

    # --- host API calls: launches or sync waits, with their causes -----------------------------------
    api_cause = by_name(api_rows, api_sync_cause, object)
    async_copy = by_name(api_rows, is_async_copy_api, bool)
    pageable = launch_pos_g[(mem_g == MEMORY_CODE["pageable"]) & is_copy_g & (launch_pos_g >= 0)]
    pageable = pageable[async_copy[pageable] & (api_cause[pageable] == "")]
    api_cause[pageable] = "blocking_copy"  # an async copy from/to pageable memory blocks the host
    sync_ev = np.flatnonzero(ph_x & cat_in(cat, ("cuda_sync",)))  # opt-in events naming the call that waited
    s_pos = launch_of(_correlation(ev, sync_ev, "f"))
    s_cause = by_name(sync_ev, lambda c: CUDA_SYNC_EVENT_CAUSE.get(c, ""), object)
    s_ok = (s_pos >= 0) & (s_cause != "")
    s_ok[s_ok] = api_cause[s_pos[s_ok]] == ""
    api_cause[s_pos[s_ok]] = s_cause[s_ok]

    # the outermost classifying aten op around a sync names its cause; around a copy launch, whether the
    # copy was asked to be non-blocking (no sync inside the same op)
    cause_ops = op_rows[by_name(op_rows, lambda c: c in CAUSE_BY_OP, bool)]
    syn = np.flatnonzero(api_cause != "")
    copy_launch = np.unique(launch_pos_g[is_copy_g & (launch_pos_g >= 0)])
    pts = np.concatenate([syn, copy_launch])
    outer = outermost_enclosing(key[cause_ops], ts[cause_ops], end[cause_ops], key[api_rows[pts]], ts[api_rows[pts]])
    syn_outer, copy_outer = outer[: len(syn)], outer[len(syn) :]
    op_cause = np.full(len(syn), "", dtype=object)
    op_cause[syn_outer >= 0] = by_name(cause_ops[syn_outer[syn_outer >= 0]], CAUSE_BY_OP.__getitem__, object)
    api_cause[syn] = np.where(op_cause != "", op_cause, api_cause[syn])
    blocked = copy_outer >= 0
    blocked[blocked] = np.isin(copy_outer[blocked], syn_outer[syn_outer >= 0])
    non_blocking_launch = np.zeros(len(api_rows), dtype=bool)
    non_blocking_launch[copy_launch] = async_copy[copy_launch] & ~blocked

    py_rows = np.flatnonzero(ph_x & cat_in(cat, ("python_function",)))
    frames = PyFrames(
        key[py_rows],
        ts[py_rows],
        end[py_rows],
        ncodes[py_rows],
        ev["arg_python_id"].to_numpy(np.int64)[py_rows],
        ev["arg_python_parent_id"].to_numpy(np.int64)[py_rows],
    )
    sources, py_cause = python_sources(frames, ncats, key[api_rows[syn]], ts[api_rows[syn]])
    api_cause[syn] = np.where(py_cause != "", py_cause, api_cause[syn])

    # --- unknown categories: annotations on their thread or stream -----------------------------------
    unknown = ph_x & ~cat_in(cat, KNOWN_CATS)
    stream_arg = ev["arg_stream"].to_numpy(np.int64)
    unk_gpu = np.flatnonzero(unknown & (stream_arg >= 0))
    unk_cpu = np.flatnonzero(unknown & (stream_arg < 0) & (pid >= 0) & (tid >= 0))

    # --- assemble: rows, lanes, steps, order, ids ------------------------------------------------------
    host_rows = np.concatenate([api_rows, op_rows, ann_rows, unk_cpu])
    gpu_rows = np.concatenate([gpu_ev, unk_gpu])
    rows = np.concatenate([host_rows, gpu_rows])
    nh, nr = len(host_rows), len(host_rows) + len(gpu_rows)
    kinds = np.concatenate(
        [
            np.where(api_cause != "", KIND_CODE["sync_wait"], KIND_CODE["launch"]).astype(np.int8),
            np.full(len(op_rows), KIND_CODE["cpu_op"], np.int8),
            np.full(len(ann_rows) + len(unk_cpu), KIND_CODE["annotation"], np.int8),
            kind_g,
            np.full(len(unk_gpu), KIND_CODE["annotation"], np.int8),
        ]
    )
    device_arg = ev["arg_device"].to_numpy(np.int64)[gpu_rows]
    is_gpu = np.arange(nr) >= nh
    lane_a = np.concatenate([pid[host_rows], np.where(device_arg >= 0, device_arg, pid[gpu_rows])])
    lane_b = np.concatenate(
        [
            tid[host_rows],
            np.where(stream_arg[gpu_rows] >= 0, stream_arg[gpu_rows], _named_id(tid[gpu_rows], table.id_names)),
        ]
    )
    lane_idx = group_numbers(is_gpu, lane_a, lane_b)
    lanes = build_lanes(ev, rank, lane_idx, is_gpu, lane_a, lane_b, kinds)

    # api_rows lead `rows`, so a position in api_rows is a position in `rows`
    launch_at = np.full(nr, -1, dtype=np.int64)
    launch_at[nh : nh + len(gpu_ev)] = launch_pos_g
    linked = launch_at >= 0
    step = step_at(steps, ts[rows])
    step[linked] = step[launch_at[linked]]  # GPU work belongs to the step that launched it
    order = start_order(ts[rows], lane_idx, end[rows]) if by_start else np.lexsort((-end[rows], ts[rows], lane_idx))
    new_id = np.empty(nr, dtype=np.int64)
    new_id[order] = np.arange(nr)
    launch_id = np.where(linked, new_id[np.maximum(launch_at, 0)], NO_LAUNCH)

    non_blocking = np.zeros(nr, dtype=bool)
    linked_g = np.flatnonzero(launch_pos_g >= 0)
    non_blocking[nh + linked_g] = is_copy_g[linked_g] & non_blocking_launch[launch_pos_g[linked_g]]
    # copies, memsets and collectives; host annotations too: gloo's collectives are host ranges
    has_bytes = (np.isin(kinds, BYTES_KIND_CODES) & is_gpu) | (kinds == KIND_CODE["annotation"])
    nbytes = np.where(has_bytes, np.maximum(ev["arg_bytes"].to_numpy(np.int64)[rows], 0), 0)
    group_codes = np.where(kinds == KIND_CODE["collective"], ev["arg_group"].cat.codes.to_numpy()[rows], 0)
    mem = np.zeros(nr, dtype=np.int8)
    mem[nh : nh + len(gpu_ev)] = np.where(kind_g == KIND_CODE["annotation"], 0, mem_g)
    sync_pos = np.full(nr, -1, dtype=np.int64)
    sync_pos[syn] = np.arange(len(syn))  # api_rows leads `rows`, so api_rows positions are row positions
    lane_o, row_o, sync_o, kinds_o, bytes_o, mem_o, non_blocking_o, step_o, launch_o, group_o = take_all(
        [(a, order) for a in (lane_idx, rows, sync_pos, kinds, nbytes, mem, non_blocking, step, launch_id, group_codes)]
    )
    lane_kinds = np.array([LANE_KIND_CODE[ln.kind] for ln in lanes], dtype=np.int8)
    start_o, end_o, name_o, stream_o, lane_kind_o = take_all(
        [
            (ts, row_o),
            (end, row_o),
            (ncodes, row_o),
            (np.array([ln.ident for ln in lanes], dtype=np.int64), lane_o),
            (lane_kinds, lane_o),
        ]
    )
    where_sync = np.flatnonzero(sync_o >= 0)
    frame = pd.DataFrame(
        {
            "id": np.arange(nr, dtype=np.int64),
            "rank": np.full(nr, rank, dtype=np.int32),
            "lane": lane_o,
            "lane_kind": pd.Categorical.from_codes(lane_kind_o, dtype=LANE_KIND_DTYPE),
            "stream": stream_o,
            "lane_label": per_lane([ln.label for ln in lanes], lane_o),
            "kind": pd.Categorical.from_codes(kinds_o, dtype=INTERVAL_KIND_DTYPE),
            "name": used_categories(name_o, ncats),
            "start_ns": start_o,
            "end_ns": end_o,
            "bytes": bytes_o,
            "memory_kind": pd.Categorical.from_codes(mem_o, dtype=MEMORY_KIND_DTYPE),
            "non_blocking": non_blocking_o,
            "step": step_o,
            "cause": _sparse_strings(nr, where_sync, api_cause[syn][sync_o[where_sync]]),
            "source": _sparse_strings(nr, where_sync, sources[sync_o[where_sync]]),
            "launch_id": launch_o,
            "group": pd.Categorical.from_codes(group_o, categories=ev["arg_group"].cat.categories),
        },
        copy=False,  # one block per column: consolidating would copy every column
    )
    meta = run_meta(table.top, source_name, world_size, rank, cat[unknown], sorted(pd.unique(lane_a[is_gpu]).tolist()))
    return Trace(meta, tuple(lanes), conform_intervals(frame), steps)
