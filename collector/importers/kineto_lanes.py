"""Lanes and run metadata of an imported torch.profiler (Kineto) trace, and per-category helpers.

Used by :mod:`collector.importers.kineto`; nothing here loops over events (only over lanes or a column's categories).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from collector.importers.threads import kineto_thread_name, thread_label
from collector.model import COPY_KINDS, KIND_CODE, IntervalKind, Lane, LaneKind, RunMeta

BYTES_KIND_CODES = [KIND_CODE[k.value] for k in (*COPY_KINDS, IntervalKind.MEMSET, IntervalKind.COLLECTIVE)]
"""Codes of the kinds that move bytes on a stream: copies, memsets and collectives."""
AUTOGRAD_OP = "autograd::engine::evaluate_function"
"""The op autograd's engine runs each backward function in: a thread that runs it (and is not the main one)
is the autograd thread, whatever the trace names it."""
ROLE_WORD = {
    LaneKind.COMPUTE_STREAM: "compute",
    LaneKind.TRANSFER_STREAM: "transfer",
    LaneKind.COMM_STREAM: "comm",
    LaneKind.OTHER_STREAM: "other",
}


def per_category(col: pd.Series, fn: Callable[[str], Any], dtype: Any, missing: Any) -> np.ndarray:
    """fn applied once per category of ``col`` (a column with few categories), spread to its rows."""
    col = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    values = np.array([fn(str(c)) for c in col.cat.categories] + [missing], dtype=dtype)
    return values[col.cat.codes.to_numpy()]


def cat_in(col: pd.Series, names: tuple[str, ...]) -> np.ndarray:
    """Row mask: the column's value is one of ``names``."""
    return per_category(col, lambda c: c in names, bool, False)


DENSE_SPAN = 16
"""Ids spanning up to this many values per id are looked up through a direct table: CUPTI's correlation ids
skip the calls it was told not to record (a few per launch), so a launch's ids are sparse by that much."""


def lookup_first(ids: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Position in ``ids`` of the first occurrence of each query (-1 where absent or negative).

    Kineto's correlation and Python ids are counters, so a direct table is used when the ids span at most
    :data:`DENSE_SPAN` values each; a hash lookup otherwise. Ids that are their own positions (a trace's
    interval ids) answer each query by itself.
    """
    ids = np.asarray(ids, dtype=np.int64)
    queries = np.asarray(queries, dtype=np.int64)
    n = len(ids)
    if n and ids[0] == 0 and ids[-1] == n - 1 and (n == 1 or bool((ids[1:] > ids[:-1]).all())):
        return np.where((queries >= 0) & (queries < n), queries, -1)
    out = np.full(len(queries), -1, dtype=np.int64)
    valid = ids >= 0
    if not valid.any() or len(queries) == 0:
        return out
    low, top = int(ids[valid].min()), int(ids.max())
    if top - low <= DENSE_SPAN * len(ids) + 4096:
        where = np.full(top - low + 1, -1, dtype=np.int32 if n < 2**31 else np.int64)
        pos = np.flatnonzero(valid)[::-1]
        where[ids[pos] - low] = pos  # reversed: the first occurrence is written last
        ok = (queries >= low) & (queries <= top)
        out[ok] = where[queries[ok] - low]
        return out
    index = pd.Index(ids)
    first = np.flatnonzero(~index.duplicated() & valid)
    at = pd.Index(ids[first]).get_indexer(queries)
    return np.where((at >= 0) & (queries >= 0), first[np.maximum(at, 0)], -1)


def rank_of(top: Mapping[str, Any]) -> tuple[int, int]:
    """(rank, world_size) from ``distributedInfo``; (0, 1) where absent or malformed."""
    info = top.get("distributedInfo") or {}
    try:
        return int(info.get("rank", 0) or 0), int(info.get("world_size", 1) or 1)
    except (TypeError, ValueError, AttributeError):
        return 0, 1


def per_lane(values: list[str], lane_o: np.ndarray) -> pd.Categorical:
    """A categorical column from one value per lane, spread over the rows' lane indices."""
    uniques = list(dict.fromkeys(values))
    codes = np.array([uniques.index(v) for v in values], dtype=np.int32)
    return pd.Categorical.from_codes(codes[lane_o] if values else lane_o, categories=pd.Index(uniques, dtype=object))


def backward_rows(ev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Mask over ``rows`` (event rows): the event is autograd's AUTOGRAD_OP."""
    return per_category(ev["name"], lambda c: str(c).startswith(AUTOGRAD_OP), bool, False)[rows]


def build_lanes(
    ev: pd.DataFrame,
    rank: int,
    lane_idx: np.ndarray,
    is_gpu: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    kinds: np.ndarray,
    runs_backward: np.ndarray,
) -> list[Lane]:
    """Lane per index, CPU threads first then (device, stream); stream roles inferred from content, and a
    thread's from its name, else from ``runs_backward`` (rows of AUTOGRAD_OP: see :func:`backward_rows`)."""
    if len(lane_idx) == 0:
        return []
    n = int(lane_idx.max()) + 1
    first = np.full(n, -1, dtype=np.int64)
    first[lane_idx[::-1]] = np.arange(len(lane_idx))[::-1]

    def count(mask: np.ndarray) -> np.ndarray:
        return np.bincount(lane_idx[mask], minlength=n)

    kernels = count(kinds == KIND_CODE["kernel"])
    collectives = count(kinds == KIND_CODE["collective"])
    backward = count(runs_backward)
    copies = count(np.isin(kinds, BYTES_KIND_CODES))
    meta = ev.iloc[np.flatnonzero(cat_in(ev["ph"], ("M",)))]  # few rows: no boolean indexing of every column
    meta = meta[meta["name"].astype(str) == "thread_name"]
    thread_names: dict[tuple[int, int], list[str]] = {}  # a thread may be named twice (its OS and Python names)
    for p, t, nm in zip(meta["pid"], meta["tid"], meta["arg_name"], strict=True):
        thread_names.setdefault((int(p), int(t)), []).append(kineto_thread_name(str(nm)))
    gpu_lanes = first[first >= 0][is_gpu[first[first >= 0]]]
    devices = {int(a[i]) for i in gpu_lanes}
    lanes: list[Lane] = []
    for i in range(n):
        row = first[i]
        la, lb = int(a[row]), int(b[row])
        if not is_gpu[row]:  # on Linux the main thread's id is the process id
            named = thread_names.get((la, lb), [])
            label = thread_label(lb, main=lb == la, names=[*named, *(("pt_autograd",) if backward[i] else ())])
            lanes.append(Lane(rank, LaneKind.CPU_THREAD, lb, label))
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
        lanes.append(Lane(rank, role, lb, f"{prefix}stream {lb} ({ROLE_WORD[role]})"))
    return lanes


def recorded_at(base_ns: Any, first_ns: int | None) -> str:
    """ISO 8601 UTC time of a Kineto trace's first event (Kineto's timestamps count from
    ``baseTimeNanoseconds``, Unix ns), '' where the trace does not say or the time is not plausible."""
    try:
        unix_ns = int(base_ns) + int(first_ns or 0)
    except (TypeError, ValueError):
        return ""
    if not int(base_ns or 0) or not 946_684_800 * 10**9 <= unix_ns <= (time.time() + 86_400) * 10**9:
        return ""  # before 2000 or in the future: not a wall clock
    return datetime.fromtimestamp(unix_ns / 1e9, timezone.utc).isoformat(timespec="seconds")


def run_meta(
    top: Mapping[str, Any],
    source_name: str,
    world_size: int,
    rank: int,
    unknown_cats: pd.Series,
    devices: list[int],
    first_ns: int | None = None,
) -> RunMeta:
    """Run metadata; device name and properties are those of the first device with GPU work. ``created`` is
    when the trace began (``baseTimeNanoseconds`` plus its first timestamp, ``first_ns``), where it says."""
    props = [p for p in top.get("deviceProperties") or [] if isinstance(p, Mapping)]
    used = [p for p in props if devices and p.get("id") == devices[0]]
    first = dict((used or props or [{}])[0])
    skipped = unknown_cats.astype(str).value_counts()
    notes: dict[str, Any] = {
        "kineto": {
            k: top[k]
            for k in (
                "schemaVersion",
                "baseTimeNanoseconds",
                "displayTimeUnit",
                "traceName",
                "distributedInfo",
                "trace_id",
            )
            if k in top
        },
        "rank": rank,
        "clock_note": "torch.profiler timestamps (microseconds with ns precision) as int ns; "
        "one clock for all ranks of a job",
        "unknown_categories_as_annotations": {str(k): int(v) for k, v in skipped.items()},
    }
    if len(props) > 1:
        notes["devices"] = [dict(p) for p in props]
    workload = os.path.basename(source_name or str(top.get("traceName") or ""))
    values: dict[str, Any] = {
        "device_name": str(first.get("name", "")),
        "device_properties": first,
        "world_size": world_size,
        "source": "torch.profiler",
        "clock": "kineto_ns",
        "workload": workload,
        "notes": notes,
    }
    began = recorded_at(top.get("baseTimeNanoseconds"), first_ns)
    if began:
        values["created"] = began
    if top.get("host_name"):
        values["host"] = str(top["host_name"])
    cuda = top.get("cuda_runtime_version") or top.get("cuda_driver_version")
    if cuda:
        values["cuda_version"] = str(cuda)
    return RunMeta.new(**values)
