"""Import torch.profiler (Kineto) Chrome traces (PyTorch 2.0 and later) into a Streamscope :class:`Trace`.

Input: an :class:`~collector.chrome.EventTable` (``collector.chrome.read_events``). One file is one rank.
What becomes what:

========================================== ==========================================================
``kernel``                                 ``kernel`` (``collective`` when the name contains "nccl")
``gpu_memcpy``                             ``memcpy_h2d/d2h/d2d``; memory kind from the name
                                           ("Memcpy HtoD (Pageable -> Device)"), bytes from ``args.bytes``
``gpu_memset``                             ``memset``
``cuda_runtime`` / ``cuda_driver``         ``launch``, or ``sync_wait`` (see :mod:`collector.kineto_sync`)
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
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from collector.chrome import EventTable, TraceFileError
from collector.kineto_sync import (
    CAUSE_BY_OP,
    CUDA_SYNC_EVENT_CAUSE,
    api_sync_cause,
    is_async_copy_api,
    outermost_enclosing,
    python_sources,
)
from collector.model import (
    INTERVAL_KIND_DTYPE,
    MEMORY_KIND_DTYPE,
    NO_LAUNCH,
    NO_STEP,
    Lane,
    LaneKind,
    MarkerKind,
    RunMeta,
    Trace,
    conform_intervals,
    conform_markers,
    empty_markers,
)

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
HOST_API_CATS = ("cuda_runtime", "cuda_driver")
USED_ELSEWHERE = ("python_function", "cuda_sync", "ac2g", "Trace")
KNOWN_CATS = (*GPU_CATS, *HOST_API_CATS, *USED_ELSEWHERE, "cpu_op", "user_annotation")

_KIND = {k: i for i, k in enumerate(INTERVAL_KIND_DTYPE.categories)}
_MEM = {k: i for i, k in enumerate(MEMORY_KIND_DTYPE.categories)}
_MEMCPY = re.compile(r"Memcpy (?P<dir>\w+) \((?P<src>\w+) -> (?P<dst>\w+)\)")
_STEP = re.compile(r"ProfilerStep#\d+")
_COPY_KINDS = ("memcpy_h2d", "memcpy_d2h", "memcpy_d2d")
_DIRECTION = {"HtoD": "memcpy_h2d", "DtoH": "memcpy_d2h", "DtoD": "memcpy_d2d", "PtoP": "memcpy_d2d"}
_ROLE_WORD = {
    LaneKind.COMPUTE_STREAM: "compute", LaneKind.TRANSFER_STREAM: "transfer",
    LaneKind.COMM_STREAM: "comm", LaneKind.OTHER_STREAM: "other",
}
_NEEDED = ("ph", "cat", "name", "pid", "tid", "ts_ns", "dur_ns", "flow_id", "arg_name", "arg_stream",
           "arg_device", "arg_correlation", "arg_bytes", "arg_python_id", "arg_python_parent_id")


def memcpy_kind(name: str) -> tuple[str, str]:
    """``"Memcpy HtoD (Pageable -> Device)"`` -> ``("memcpy_h2d", "pageable")``; unknown -> ``("", "")``."""
    m = _MEMCPY.search(name)
    if m is None or m.group("dir") not in _DIRECTION:
        return "", ""
    kind = _DIRECTION[m.group("dir")]
    host = {"memcpy_h2d": m.group("src"), "memcpy_d2h": m.group("dst")}.get(kind, "Device").lower()
    return kind, host if host in _MEM else ""


def _per_category(col: pd.Series, fn: Callable[[str], Any], dtype: Any, missing: Any) -> np.ndarray:
    """fn applied once per category of ``col`` (a column with few categories), spread to its rows."""
    col = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    values = np.array([fn(str(c)) for c in col.cat.categories] + [missing], dtype=dtype)
    return values[col.cat.codes.to_numpy()]


def _is(col: pd.Series, names: tuple[str, ...]) -> np.ndarray:
    return _per_category(col, lambda c: c in names, bool, False)


def _by_name(codes: np.ndarray, categories: pd.Index, fn: Callable[[str], Any], dtype: Any) -> np.ndarray:
    """fn applied once per distinct name among ``codes`` (name codes of some rows), spread to those rows."""
    if len(codes) == 0:
        return np.array([], dtype=dtype)
    used, inverse = np.unique(codes, return_inverse=True)
    values = np.array([fn(str(categories[c]) if c >= 0 else "") for c in used], dtype=dtype)
    return values[inverse.reshape(-1)]


def _rank(top: Mapping[str, Any]) -> tuple[int, int]:
    info = top.get("distributedInfo") or {}
    try:
        return int(info.get("rank", 0) or 0), int(info.get("world_size", 1) or 1)
    except (TypeError, ValueError, AttributeError):
        return 0, 1


def _flow_ids(ev: pd.DataFrame, rows: np.ndarray, phase: str) -> np.ndarray:
    """``ac2g`` flow id whose ``phase`` end sits on each row's (pid, tid, ts), or -1."""
    flows = ev[_is(ev["ph"], (phase,)) & _is(ev["cat"], ("ac2g",))][["pid", "tid", "ts_ns", "flow_id"]]
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
    steps = pd.DataFrame({
        "rank": rank, "kind": MarkerKind.STEP.value, "name": [f"ProfilerStep#{n}" for n in numbers],
        "step": numbers, "start_ns": start,
        "end_ns": start + np.maximum(ev["dur_ns"].to_numpy(np.int64)[rows], 0),
    })
    return conform_markers(steps.sort_values("start_ns").drop_duplicates("step"))


def _step_at(steps: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Step number whose [start, end) holds each time, or NO_STEP."""
    if steps.empty:
        return np.full(len(t), NO_STEP, dtype=np.int32)
    s = steps.sort_values("start_ns")
    starts, ends = s["start_ns"].to_numpy(), s["end_ns"].to_numpy()
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t < ends[np.maximum(i, 0)])
    return np.where(ok, s["step"].to_numpy()[np.maximum(i, 0)], NO_STEP).astype(np.int32)


def _sparse_strings(n: int, positions: np.ndarray, values: np.ndarray) -> pd.Categorical:
    """A categorical of ``n`` empty strings with ``values`` at ``positions`` (cheap for sparse columns)."""
    vocab, codes_at = np.unique(np.asarray(values, dtype=str), return_inverse=True)
    categories = ["", *[v for v in vocab if v != ""]]
    remap = np.array([categories.index(v) for v in vocab], dtype=np.int32)
    codes = np.zeros(n, dtype=np.int32)
    codes[positions] = remap[codes_at] if len(vocab) else 0
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories))


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


def trace_from_kineto(table: EventTable, *, source_name: str = "") -> Trace:
    """Turn a parsed torch.profiler Chrome trace into a :class:`Trace` (one rank). See the module docstring.

    Raises TraceFileError (one line) when the table lacks the event-table columns.
    """
    ev = table.events
    missing = [c for c in _NEEDED if c not in ev.columns]
    if missing:
        raise TraceFileError(f"{source_name or 'trace'}: event table lacks columns {', '.join(missing)}")
    rank, world_size = _rank(table.top)
    ph_x = _is(ev["ph"], ("X",))
    cat = ev["cat"]
    pid, tid = ev["pid"].to_numpy(np.int64), ev["tid"].to_numpy(np.int64)
    ts = ev["ts_ns"].to_numpy(np.int64)
    end = ts + np.maximum(ev["dur_ns"].to_numpy(np.int64), 0)
    names = ev["name"] if isinstance(ev["name"].dtype, pd.CategoricalDtype) else ev["name"].astype("category")
    ncodes, ncats = names.cat.codes.to_numpy(), names.cat.categories
    key = _thread_key(pid, tid)

    def by_name(rows: np.ndarray, fn: Callable[[str], Any], dtype: Any) -> np.ndarray:
        return _by_name(ncodes[rows], ncats, fn, dtype)

    # --- steps: ProfilerStep#N ranges (cpu_op before PyTorch 2.1, user_annotation since) -------------
    oa_rows = np.flatnonzero(ph_x & _is(cat, ("cpu_op", "user_annotation")))
    step_no = by_name(oa_rows, lambda c: int(c[13:]) if _STEP.fullmatch(c) else -1, np.int64)
    steps = _step_ranges(ev, oa_rows, step_no, rank)
    op_rows = oa_rows[(step_no < 0) & _is(cat.iloc[oa_rows], ("cpu_op",))]
    ann_rows = oa_rows[(step_no < 0) & _is(cat.iloc[oa_rows], ("user_annotation",))]

    # --- GPU work and its launch links ---------------------------------------------------------------
    api_rows = np.flatnonzero(ph_x & _is(cat, HOST_API_CATS))
    gpu_ev = np.flatnonzero(ph_x & _is(cat, GPU_CATS))
    corr_r = _correlation(ev, api_rows, "s")
    r_unique = np.flatnonzero(~pd.Index(corr_r).duplicated() & (corr_r >= 0))
    lookup = pd.Index(corr_r[r_unique])

    def launch_of(corr: np.ndarray) -> np.ndarray:
        at = lookup.get_indexer(corr)
        return np.where((at >= 0) & (corr >= 0), r_unique[np.maximum(at, 0)], -1)

    g_is = {c: _is(cat.iloc[gpu_ev], (c,)) for c in GPU_CATS}
    launch_pos_g = np.full(len(gpu_ev), -1, dtype=np.int64)
    work = ~g_is["gpu_user_annotation"]  # GPU-side ranges were not launched by one call
    launch_pos_g[work] = launch_of(_correlation(ev, gpu_ev[work], "f"))
    kind_g = np.full(len(gpu_ev), _KIND["annotation"], dtype=np.int8)
    mem_g = np.zeros(len(gpu_ev), dtype=np.int8)
    k, m = g_is["kernel"], g_is["gpu_memcpy"]
    kind_g[k] = np.where(by_name(gpu_ev[k], lambda c: "nccl" in c.lower(), bool), _KIND["collective"], _KIND["kernel"])
    kind_g[m] = by_name(gpu_ev[m], lambda c: _KIND.get(memcpy_kind(c)[0], _KIND["annotation"]), np.int8)
    mem_g[m] = by_name(gpu_ev[m], lambda c: _MEM[memcpy_kind(c)[1]], np.int8)
    kind_g[g_is["gpu_memset"]] = _KIND["memset"]
    mem_g[g_is["gpu_memset"]] = _MEM["device"]
    is_copy_g = m & (kind_g != _KIND["annotation"])

    # --- host API calls: launches or sync waits, with their causes -----------------------------------
    api_cause = by_name(api_rows, api_sync_cause, object)
    async_copy = by_name(api_rows, is_async_copy_api, bool)
    pageable = launch_pos_g[(mem_g == _MEM["pageable"]) & is_copy_g & (launch_pos_g >= 0)]
    pageable = pageable[async_copy[pageable] & (api_cause[pageable] == "")]
    api_cause[pageable] = "blocking_copy"  # an async copy from/to pageable memory blocks the host
    sync_ev = np.flatnonzero(ph_x & _is(cat, ("cuda_sync",)))  # opt-in events naming the call that waited
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
    syn_outer, copy_outer = outer[: len(syn)], outer[len(syn):]
    op_cause = np.full(len(syn), "", dtype=object)
    op_cause[syn_outer >= 0] = by_name(cause_ops[syn_outer[syn_outer >= 0]], CAUSE_BY_OP.__getitem__, object)
    api_cause[syn] = np.where(op_cause != "", op_cause, api_cause[syn])
    blocked = copy_outer >= 0
    blocked[blocked] = np.isin(copy_outer[blocked], syn_outer[syn_outer >= 0])
    non_blocking_launch = np.zeros(len(api_rows), dtype=bool)
    non_blocking_launch[copy_launch] = async_copy[copy_launch] & ~blocked

    py_rows = np.flatnonzero(ph_x & _is(cat, ("python_function",)))
    frames = pd.DataFrame({
        "key": key[py_rows], "start_ns": ts[py_rows], "end_ns": end[py_rows], "code": ncodes[py_rows],
        "py_id": ev["arg_python_id"].to_numpy(np.int64)[py_rows],
        "parent_id": ev["arg_python_parent_id"].to_numpy(np.int64)[py_rows],
    })
    sources, py_cause = python_sources(frames, ncats, key[api_rows[syn]], ts[api_rows[syn]])
    api_cause[syn] = np.where(py_cause != "", py_cause, api_cause[syn])

    # --- unknown categories: annotations on their thread or stream -----------------------------------
    unknown = ph_x & ~_is(cat, KNOWN_CATS)
    stream_arg = ev["arg_stream"].to_numpy(np.int64)
    unk_gpu = np.flatnonzero(unknown & (stream_arg >= 0))
    unk_cpu = np.flatnonzero(unknown & (stream_arg < 0) & (pid >= 0) & (tid >= 0))

    # --- assemble: rows, lanes, steps, order, ids ------------------------------------------------------
    host_rows = np.concatenate([api_rows, op_rows, ann_rows, unk_cpu])
    gpu_rows = np.concatenate([gpu_ev, unk_gpu])
    rows = np.concatenate([host_rows, gpu_rows])
    nh, nr = len(host_rows), len(host_rows) + len(gpu_rows)
    kinds = np.concatenate([
        np.where(api_cause != "", _KIND["sync_wait"], _KIND["launch"]).astype(np.int8),
        np.full(len(op_rows), _KIND["cpu_op"], np.int8), np.full(len(ann_rows) + len(unk_cpu), _KIND["annotation"], np.int8),
        kind_g, np.full(len(unk_gpu), _KIND["annotation"], np.int8),
    ])
    device_arg = ev["arg_device"].to_numpy(np.int64)[gpu_rows]
    is_gpu = np.arange(nr) >= nh
    lane_a = np.concatenate([pid[host_rows], np.where(device_arg >= 0, device_arg, pid[gpu_rows])])
    lane_b = np.concatenate([tid[host_rows], np.where(stream_arg[gpu_rows] >= 0, stream_arg[gpu_rows],
                                                      _named_id(tid[gpu_rows], table.id_names))])
    lane_idx = pd.DataFrame({"g": is_gpu, "a": lane_a, "b": lane_b}).groupby(["g", "a", "b"]).ngroup()
    lane_idx = lane_idx.to_numpy(np.int32)
    lanes = _lanes(ev, rank, lane_idx, is_gpu, lane_a, lane_b, kinds)

    launch_row = np.full(nr, -1, dtype=np.int64)
    launch_row[nh: nh + len(gpu_ev)] = np.where(launch_pos_g >= 0, api_rows[np.maximum(launch_pos_g, 0)], -1)
    linked = launch_row >= 0
    step = _step_at(steps, ts[rows])
    step_of_row = np.full(len(ev), NO_STEP, dtype=np.int32)
    step_of_row[host_rows] = step[:nh]
    step[linked] = step_of_row[launch_row[linked]]  # GPU work belongs to the step that launched it
    order = np.lexsort((-end[rows], ts[rows], lane_idx))
    id_of_row = np.full(len(ev), NO_LAUNCH, dtype=np.int64)
    id_of_row[rows[order]] = np.arange(nr)
    launch_id = np.where(linked, id_of_row[np.maximum(launch_row, 0)], NO_LAUNCH)

    non_blocking = np.zeros(nr, dtype=bool)
    non_blocking[nh: nh + len(gpu_ev)] = is_copy_g & (launch_pos_g >= 0) & non_blocking_launch[
        np.maximum(launch_pos_g, 0)]
    has_bytes = np.isin(kinds, [_KIND[k] for k in (*_COPY_KINDS, "memset")]) & is_gpu
    nbytes = np.where(has_bytes, np.maximum(ev["arg_bytes"].to_numpy(np.int64)[rows], 0), 0)
    mem = np.zeros(nr, dtype=np.int8)
    mem[nh: nh + len(gpu_ev)] = np.where(kind_g == _KIND["annotation"], 0, mem_g)
    sync_pos = np.full(nr, -1, dtype=np.int64)
    sync_pos[syn] = np.arange(len(syn))  # api_rows leads `rows`, so api_rows positions are row positions
    sync_o = sync_pos[order]
    where_sync = np.flatnonzero(sync_o >= 0)
    lane_o = lane_idx[order]
    frame = pd.DataFrame({
        "id": np.arange(nr, dtype=np.int64),
        "rank": np.full(nr, rank, dtype=np.int32),
        "lane": lane_o,
        "lane_kind": _per_lane([ln.kind.value for ln in lanes], lane_o),
        "stream": np.array([ln.ident for ln in lanes], dtype=np.int64)[lane_o],
        "lane_label": _per_lane([ln.label for ln in lanes], lane_o),
        "kind": pd.Categorical.from_codes(kinds[order], dtype=INTERVAL_KIND_DTYPE),
        "name": pd.Categorical.from_codes(ncodes[rows][order], categories=ncats).remove_unused_categories(),
        "start_ns": ts[rows][order],
        "end_ns": end[rows][order],
        "bytes": nbytes[order],
        "memory_kind": pd.Categorical.from_codes(mem[order], dtype=MEMORY_KIND_DTYPE),
        "non_blocking": non_blocking[order],
        "step": step[order],
        "cause": _sparse_strings(nr, where_sync, api_cause[syn][sync_o[where_sync]]),
        "source": _sparse_strings(nr, where_sync, sources[sync_o[where_sync]]),
        "launch_id": launch_id[order],
    })
    meta = _meta(table.top, source_name, world_size, rank, ev, ph_x, np.unique(lane_a[is_gpu]).tolist())
    return Trace(meta, tuple(lanes), conform_intervals(frame), steps)


def _per_lane(values: list[str], lane_o: np.ndarray) -> pd.Categorical:
    """A categorical column from one value per lane, spread over the rows' lane indices."""
    uniques = list(dict.fromkeys(values))
    codes = np.array([uniques.index(v) for v in values], dtype=np.int32)
    return pd.Categorical.from_codes(codes[lane_o] if values else lane_o, categories=pd.Index(uniques, dtype=object))


def _lanes(ev: pd.DataFrame, rank: int, lane_idx: np.ndarray, is_gpu: np.ndarray, a: np.ndarray,
           b: np.ndarray, kinds: np.ndarray) -> list[Lane]:
    """Lane per index, CPU threads first then (device, stream); stream roles inferred from content."""
    if len(lane_idx) == 0:
        return []
    n = int(lane_idx.max()) + 1
    first = np.full(n, -1, dtype=np.int64)
    first[lane_idx[::-1]] = np.arange(len(lane_idx))[::-1]

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(lane_idx[mask], minlength=n)

    kernels = count(kinds == _KIND["kernel"])
    collectives = count(kinds == _KIND["collective"])
    copies = count(np.isin(kinds, [_KIND[k] for k in (*_COPY_KINDS, "memset")]))
    meta = ev[_is(ev["ph"], ("M",)) & _is(ev["name"], ("thread_name",))]
    thread_names = {(int(p), int(t)): str(nm) for p, t, nm in zip(meta["pid"], meta["tid"], meta["arg_name"], strict=True)}
    gpu_lanes = first[first >= 0][is_gpu[first[first >= 0]]]
    devices = {int(a[i]) for i in gpu_lanes}
    lanes: list[Lane] = []
    for i in range(n):
        row = first[i]
        la, lb = int(a[row]), int(b[row])
        if not is_gpu[row]:
            lanes.append(Lane(rank, LaneKind.CPU_THREAD, lb, thread_names.get((la, lb)) or f"thread {lb}"))
            continue
        if kernels[i]:
            role = LaneKind.COMPUTE_STREAM
        elif collectives[i]:
            role = LaneKind.COMM_STREAM
        elif copies[i]:
            role = LaneKind.TRANSFER_STREAM
        else:
            role = LaneKind.OTHER_STREAM
        prefix = f"GPU {la} " if len(devices) > 1 else ""
        lanes.append(Lane(rank, role, lb, f"{prefix}stream {lb} ({_ROLE_WORD[role]})"))
    return lanes


def _meta(top: Mapping[str, Any], source_name: str, world_size: int, rank: int, ev: pd.DataFrame,
          ph_x: np.ndarray, devices: list[int]) -> RunMeta:
    """Run metadata; device name and properties are those of the first device with GPU work."""
    props = [p for p in top.get("deviceProperties") or [] if isinstance(p, Mapping)]
    used = [p for p in props if devices and p.get("id") == devices[0]]
    first = dict((used or props or [{}])[0])
    skipped = ev["cat"][ph_x & ~_is(ev["cat"], KNOWN_CATS)].astype(str).value_counts()
    notes: dict[str, Any] = {
        "kineto": {k: top[k] for k in ("schemaVersion", "baseTimeNanoseconds", "displayTimeUnit", "traceName",
                                        "distributedInfo", "trace_id") if k in top},
        "rank": rank,
        "clock_note": "torch.profiler timestamps (microseconds with ns precision) as int ns; "
                      "one clock for all ranks of a job",
        "unknown_categories_as_annotations": {str(k): int(v) for k, v in skipped.items()},
    }
    if len(props) > 1:
        notes["devices"] = [dict(p) for p in props]
    workload = os.path.basename(source_name or str(top.get("traceName") or ""))
    values: dict[str, Any] = {
        "device_name": str(first.get("name", "")), "device_properties": first, "world_size": world_size,
        "source": "torch.profiler", "clock": "kineto_ns", "workload": workload, "notes": notes,
    }
    if top.get("host_name"):
        values["host"] = str(top["host_name"])
    cuda = top.get("cuda_runtime_version") or top.get("cuda_driver_version")
    if cuda:
        values["cuda_version"] = str(cuda)
    return RunMeta.new(**values)
