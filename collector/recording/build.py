"""Turn the recorder's raw rows into a :class:`~collector.model.Trace` (lanes, run DataFrame, markers).

Host rows: ``(tid, kind, name, t0_ns, t1_ns, bytes, memory_kind, non_blocking, step, source, cause, id)``.
GPU rows: ``((device, stream_id), kind, name, start_ms, end_ms, bytes, memory_kind, non_blocking, step,
launch_id, id)`` with times in event milliseconds after the first anchor, mapped through a ClockMap.
Marker rows: ``(kind, name, start_ns, end_ns, step)``. Stream lanes whose intervals are all copies are
transfer streams, the others compute streams; ``stream_names`` labels lanes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from collector.importers.kineto_lanes import lookup_first
from collector.model import (
    COPY_KINDS,
    Lane,
    LaneKind,
    MarkerKind,
    RunMeta,
    Trace,
    conform_intervals,
    conform_markers,
    empty_markers,
)
from collector.recording.clock import ClockMap

_COPY_VALUES = {k.value for k in COPY_KINDS}


def stream_role(kinds: set[str]) -> LaneKind:
    """TRANSFER_STREAM if every interval kind on the stream is a copy, else COMPUTE_STREAM."""
    return LaneKind.TRANSFER_STREAM if kinds and kinds <= _COPY_VALUES else LaneKind.COMPUTE_STREAM


def _value(kind: Any) -> str:
    return str(getattr(kind, "value", kind))


def launch_end_ns(host_cols: Sequence[Any], launch_ids: Sequence[int]) -> np.ndarray:
    """End (host ns) of the host call that launched each GPU row, or int64 min where unknown.

    A kernel cannot start before it is launched. An event pair on a drained stream starts when the start
    event runs, before the host even reached the launch; so starts are bounded by the op's host end.
    """
    wanted = np.asarray(launch_ids, dtype=np.int64)
    out = np.full(len(wanted), np.iinfo(np.int64).min, dtype=np.int64)
    pos = lookup_first(np.asarray(host_cols[11], dtype=np.int64), wanted)
    out[pos >= 0] = np.asarray(host_cols[4], dtype=np.int64)[pos[pos >= 0]]
    return out


DRAINED_SHARE = 0.1
"""Share of GPU intervals timed on a drained stream above which an events-mode trace warns."""
SHORT_NS = 20_000
"""Median duration of those intervals below which their event latency (a few us each) matters."""


def drained_warning(drained: np.ndarray, dur_ns: np.ndarray) -> str:
    """The warning an events-mode trace carries when many intervals were timed on a drained stream and are
    short: their ends hold the event's latency, so busy time is overstated; "" otherwise."""
    if not len(drained) or drained.mean() < DRAINED_SHARE:
        return ""
    median_ns = float(np.median(dur_ns[drained]))
    if median_ns >= SHORT_NS:
        return ""
    return (
        f"{drained.mean():.0%} of GPU intervals ran on a drained stream and last {median_ns / 1e3:.1f} us "
        "(median): "
        "each holds a few us of launch and event latency, so GPU busy time is overstated here; "
        "record with --timing cupti for exact kernel times"
    )


def build_trace(
    meta: RunMeta,
    rank: int,
    host: Sequence[tuple[Any, ...]],
    gpu: Sequence[tuple[Any, ...]],
    markers: Sequence[tuple[str, str, int, int, int]],
    threads: Mapping[int, str],
    stream_names: Mapping[tuple[int, int], str],
    clock: ClockMap,
    event_overhead_ms: float = 0.0,
) -> Trace:
    """The Trace of one recording; GPU starts move later by ``event_overhead_ms`` (at most half an interval)
    and never precede the end of their launching host call (:func:`launch_end_ns`)."""
    lanes: list[Lane] = []
    lane_of: dict[Any, int] = {}
    for tid, label in threads.items():
        lane_of[("cpu", tid)] = len(lanes)
        lanes.append(Lane(rank, LaneKind.CPU_THREAD, int(tid), label))
    kinds_by_stream: dict[tuple[int, int], set[str]] = {}
    for row in gpu:
        kinds_by_stream.setdefault(row[0], set()).add(_value(row[1]))
    for key in sorted(kinds_by_stream):
        dev, sid = key
        role = stream_role(kinds_by_stream[key])
        name = stream_names.get(key) or ("default stream" if sid == 0 else f"stream {sid}")
        lane_of[("gpu", key)] = len(lanes)
        lanes.append(Lane(rank, role, int(sid), f"cuda:{dev} {name} ({role.value.split('_')[0]})"))

    host_cols: list[Any] = list(zip(*host, strict=True)) if host else [() for _ in range(12)]
    gpu_cols: list[Any] = list(zip(*gpu, strict=True)) if gpu else [() for _ in range(11)]
    n_host, n_gpu = len(host), len(gpu)
    start_ms = np.array(gpu_cols[3], dtype=np.float64)
    end_ms = np.maximum(np.array(gpu_cols[4], dtype=np.float64), start_ms)
    if event_overhead_ms > 0:
        start_ms = start_ms + np.minimum(event_overhead_ms, (end_ms - start_ms) / 2)
    gpu_start = clock.to_host_ns(start_ms)
    gpu_end = clock.to_host_ns(end_ms)
    launched = launch_end_ns(host_cols, gpu_cols[9])
    drained = launched > gpu_start  # the start event ran before the host had launched the work
    gpu_start = np.minimum(np.maximum(gpu_start, launched), gpu_end)
    gpu_end = np.maximum(gpu_end, gpu_start)
    warning = drained_warning(drained, gpu_end - gpu_start)
    if warning:
        notes = dict(meta.notes or {})
        notes["timing_note"] = "; ".join(x for x in (str(notes.get("timing_note") or ""), warning) if x)
        notes["drained_share"] = round(float(drained.mean()), 3)
        meta = replace(meta, notes=notes)
    cols: dict[str, Any] = {
        "lane": [lane_of[("cpu", t)] for t in host_cols[0]] + [lane_of[("gpu", k)] for k in gpu_cols[0]],
        "kind": [_value(k) for k in host_cols[1]] + [_value(k) for k in gpu_cols[1]],
        "name": list(host_cols[2]) + list(gpu_cols[2]),
        "start_ns": np.concatenate([np.array(host_cols[3], dtype=np.int64), gpu_start]),
        "end_ns": np.concatenate([np.array(host_cols[4], dtype=np.int64), gpu_end]),
        "bytes": np.array(list(host_cols[5]) + list(gpu_cols[5]), dtype=np.int64),
        "memory_kind": list(host_cols[6]) + list(gpu_cols[6]),
        "non_blocking": np.array(list(host_cols[7]) + list(gpu_cols[7]), dtype=bool),
        "step": np.array(list(host_cols[8]) + list(gpu_cols[8]), dtype=np.int32),
        "source": list(host_cols[9]) + [""] * n_gpu,
        "cause": list(host_cols[10]) + [""] * n_gpu,
        "launch_id": np.concatenate([np.full(n_host, -1, dtype=np.int64), np.array(gpu_cols[9], dtype=np.int64)]),
        "id": np.array(list(host_cols[11]) + list(gpu_cols[10]), dtype=np.int64),
    }
    lane_idx = np.array(cols["lane"], dtype=np.int32)
    cols["lane"] = lane_idx
    cols["rank"] = np.full(len(lane_idx), rank, dtype=np.int32)
    # per-lane values spread over the rows by lane index (no Python loop over intervals)
    cols["lane_kind"] = np.array([ln.kind.value for ln in lanes], dtype=object)[lane_idx]
    cols["stream"] = np.array([ln.ident for ln in lanes], dtype=np.int64)[lane_idx]
    cols["lane_label"] = np.array([ln.label for ln in lanes], dtype=object)[lane_idx]
    frame = pd.DataFrame(cols).sort_values(["start_ns", "id"], kind="stable")
    intervals = conform_intervals(frame)
    if markers:
        mframe = pd.DataFrame(
            {
                "rank": rank,
                "kind": [MarkerKind(m[0]).value for m in markers],
                "name": [m[1] for m in markers],
                "start_ns": [m[2] for m in markers],
                "end_ns": [m[3] for m in markers],
                "step": [m[4] for m in markers],
            }
        )
        mk = conform_markers(mframe)
    else:
        mk = empty_markers()
    return Trace(meta, tuple(lanes), intervals, mk)
