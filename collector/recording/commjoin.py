"""Communication in a GPU rank's trace: its collectives, and the host work they did told apart from the user's.

Input: one rank's enriched trace (collector.recording.enrich), the collectives the flight recorder saw
(collector.recording.comm; None where it could not be read) and :class:`Threads` (which threads Python ran
on, and how CUPTI's thread ids map to the trace's).

* **NCCL**: its kernels are ``collective`` intervals already; each takes the process group and bytes of the
  call enqueued last before its launch.
* **gloo with CUDA tensors**: the enqueuing thread copies the tensors to pinned host memory, then a worker
  thread of gloo's own (one Python never runs on, that launches no kernel) waits for that copy
  (``cudaStreamSynchronize``), runs the collective on the host and copies the result back
  (``cudaMemcpyAsync``). Each such *run* (:func:`run_starts`: from a wait, or a copy back that no wait
  preceded, to the row before the next run) is paired with the earliest gloo call not yet paired that was
  enqueued before it and whose bytes match (gloo runs its calls in order; calls of host tensors run no CUDA
  work and are passed over), and becomes a ``collective`` interval named after the call, from its enqueue
  (when this rank arrived) to the run's end, on a ``gloo comm (thread N)`` lane. Without the flight recorder
  each run is a ``<backend>:collective``.
* The worker's waits get cause ``collective`` and the collective's name as source (``<backend>:collective``
  for a run that pairs with no call); its copies, and the
  enqueuing thread's copies launched just before the call was enqueued (gloo makes the work, which starts
  them, then enqueues it), get the same source and cause, so no finding blames them on the user's code.

Loops run over comm threads, runs and calls (a few per step), never over the trace's intervals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from collector.importers.frames import concat_keeping_codes, renumber_by_start
from collector.importers.kineto_lanes import lookup_first
from collector.model import COPY_CODES, KIND_CODE, Lane, LaneKind, Trace, conform_intervals, step_at
from collector.recording.comm import CollectiveCall

COLLECTIVE_CAUSE = "collective"
"""The ``cause`` of a wait or copy that a collective made (the ``source`` then names the collective)."""
PAIR_SLACK_NS = 50_000
"""Margin between the flight recorder's enqueue times and CUPTI's times mapped onto the same wall clock: an
NCCL kernel's launch may read up to this much earlier than its call and still count as after it, and a copy
made just before a gloo call's enqueue this much later and still count as before it (NCCL calls can follow
each other closely, so the margin stays small)."""
RUN_SLACK_NS = 1_000_000
"""A gloo worker's run may start this much before its call's enqueue time reads: calls are taken in order,
the earliest first, so a wider margin only guards against the clocks disagreeing."""
ENQUEUE_NS = 2_000_000
"""The enqueuing thread's copies of a call's tensors start within this long before the call is enqueued."""

RECORD_CALLS = ("cudaEventRecord", "cuEventRecord", "hipEventRecord")
"""Host calls that record an event (gloo records one after each copy back)."""
_SYNC, _COLL = KIND_CODE["sync_wait"], KIND_CODE["collective"]
_KERNELS = [KIND_CODE["kernel"], KIND_CODE["collective"]]


@dataclass(frozen=True)
class Threads:
    """``python``: native ids of the threads Python ran on; ``native``: CUPTI thread id (``pthread_self``,
    low 32 bits) -> the native id the trace's lanes carry, for the threads whose native id is known."""

    python: frozenset[int] = frozenset()
    native: Mapping[int, int] = field(default_factory=dict)


@dataclass
class _Runs:
    """Runs on the comm threads, in start order: lane, start/end ns, bytes copied back, and the rows of each."""

    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    bytes: np.ndarray
    rows: list[np.ndarray]


def join_comm(trace: Trace, calls: Sequence[CollectiveCall] | None, threads: Threads, backend: str = "") -> Trace:
    """``trace`` with its collectives and their host work marked (module docstring). ``backend``: the default
    process group's backend, for runs without the flight recorder ("" to make none)."""
    iv = trace.intervals
    if iv.empty:
        return trace
    calls = sorted(calls, key=lambda c: c.created_ns) if calls is not None else None
    nccl_calls = [c for c in calls or [] if c.backend == "nccl"]
    gloo = [c for c in calls or [] if c.backend == "gloo" and "barrier" not in c.name]
    if not nccl_calls and not gloo and not (calls is None and backend):
        return trace  # nothing to join: no collective was called while recording
    kind = iv["kind"].cat.codes.to_numpy()
    launch = lookup_first(iv["id"].to_numpy(np.int64), iv["launch_id"].to_numpy(np.int64))
    edits = _Edits(iv, kind, launch)
    nccl = _name_nccl(iv, kind, launch, nccl_calls, edits)
    runs = _runs(trace, kind, launch, threads.python)
    rows: list[dict[str, Any]] = []
    lanes = list(trace.lanes)
    comm_lane: dict[int, int] = {}
    paired = _pair(runs, gloo) if calls is not None else [None] * len(runs.start)
    for r, call in enumerate(paired):
        name = call.name if call is not None else f"{backend or 'gloo'}:collective"
        if call is None and (calls is not None or not backend):
            # no call to pair with (a call the ring missed, clocks apart): no collective is made up, but the
            # worker's waits and copies are still the communication's, never the user's
            edits.mark(runs.rows[r], name)
            continue
        li = int(runs.lane[r])
        if li not in comm_lane:
            cpu = lanes[li]
            prefix = name.split(":", 1)[0]
            comm_lane[li] = len(lanes)
            lanes.append(Lane(cpu.rank, LaneKind.COMM_STREAM, cpu.ident, f"{prefix} comm (thread {cpu.ident})"))
            lanes[li] = replace(cpu, label=f"{prefix} worker (thread {cpu.ident})")
        start = int(runs.start[r]) if call is None else min(call.created_ns, int(runs.start[r]))
        rows.append(
            {
                "lane": comm_lane[li],
                "name": name,
                "start_ns": start,
                "end_ns": int(runs.end[r]),
                "bytes": call.bytes if call is not None and call.bytes else int(runs.bytes[r]),
                "group": call.group if call is not None else "",
            }
        )
        edits.mark(runs.rows[r], name)
        if call is not None:
            edits.mark(_enqueue_copies(edits, call, threads, gloo), name)
    if not rows and not nccl:
        return trace
    frame = edits.apply()
    notes = {
        **dict(trace.meta.notes),
        "comm": {
            "calls": "flight recorder" if calls is not None else "worker threads",
            "host_collectives": len(rows),
            "nccl_kernels_named": nccl,
            "waits_and_copies_marked": edits.count,
        },
    }
    lanes = _label_comm_copy_streams(lanes, frame, rows[0]["name"].split(":", 1)[0] if rows else "")
    out = replace(trace, lanes=tuple(lanes), intervals=frame).with_meta(notes=notes)
    return _with_collectives(out, rows) if rows else out


def _label_comm_copy_streams(lanes: list[Lane], frame: pd.DataFrame, backend: str) -> list[Lane]:
    """``lanes`` with each transfer stream whose every copy a collective made labelled ``stream N (<backend>
    copies)``: gloo stages CUDA tensors through a pool of side streams, one lane each."""
    if not backend:
        return lanes
    on = frame["lane"].to_numpy(np.int64)
    by_collective = (frame["cause"] == COLLECTIVE_CAUSE).to_numpy(bool)
    rows = np.bincount(on, minlength=len(lanes))
    marked = np.bincount(on[by_collective], minlength=len(lanes))
    return [
        replace(ln, label=f"stream {ln.ident} ({backend} copies)")
        if ln.kind is LaneKind.TRANSFER_STREAM and rows[i] and marked[i] == rows[i]
        else ln
        for i, ln in enumerate(lanes)
    ]


class _Edits:
    """Cause, source, group and bytes of existing rows, changed by position; applied at once. Knows every
    copy's launch row (``copy_launch``, with the copies it launched) in launch start order."""

    def __init__(self, iv: pd.DataFrame, kind: np.ndarray, launch: np.ndarray) -> None:
        self.iv = iv
        self.kind = kind
        self.marked: dict[int, str] = {}
        self.groups: dict[int, str] = {}
        self.bytes = iv["bytes"].to_numpy(np.int64).copy()
        copies = np.flatnonzero(np.isin(kind, COPY_CODES) & (launch >= 0))
        self.copies_by_launch: dict[int, list[int]] = {}
        for c, at in zip(copies.tolist(), launch[copies].tolist(), strict=True):
            self.copies_by_launch.setdefault(at, []).append(c)
        rows = np.array(sorted(self.copies_by_launch), dtype=np.int64)
        starts = iv["start_ns"].to_numpy(np.int64)[rows]
        order = np.argsort(starts, kind="stable")
        self.copy_launch, self.copy_launch_start = rows[order], starts[order]
        self.copy_launch_tid = iv["stream"].to_numpy(np.int64)[self.copy_launch]

    @property
    def count(self) -> int:
        return len(self.marked)

    def mark(self, rows: Sequence[int] | np.ndarray, name: str) -> None:
        """Waits and copy launches among ``rows``, and the copies they launched: cause and source."""
        for i in np.asarray(rows, dtype=np.int64).tolist():
            copies = self.copies_by_launch.get(i)
            if copies is not None or self.kind[i] == _SYNC:
                self.marked[i] = name
            for c in copies or ():
                self.marked[c] = name

    def apply(self) -> pd.DataFrame:
        frame = self.iv.copy(deep=False)
        if self.marked:
            at = np.fromiter(self.marked, np.int64, len(self.marked))
            names = list(self.marked.values())
            frame["cause"] = _set_strings(frame["cause"], at, [COLLECTIVE_CAUSE] * len(at))
            frame["source"] = _set_strings(frame["source"], at, names)
        if self.groups:
            at = np.fromiter(self.groups, np.int64, len(self.groups))
            frame["group"] = _set_strings(frame["group"], at, list(self.groups.values()))
        frame["bytes"] = self.bytes
        return frame


def _set_strings(col: pd.Series, at: np.ndarray, values: Sequence[str]) -> pd.Categorical:
    """A categorical column with ``values`` at positions ``at`` (codes only: no string per row)."""
    cat = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype(str).astype("category")
    labels = [str(c) for c in cat.cat.categories]
    index = {v: i for i, v in enumerate(labels)}
    for v in values:
        index.setdefault(v, len(index))
    codes = cat.cat.codes.to_numpy(np.int64).copy()
    codes[at] = [index[v] for v in values]
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(index), dtype=object))


def _name_nccl(
    iv: pd.DataFrame, kind: np.ndarray, launch: np.ndarray, calls: Sequence[CollectiveCall], edits: _Edits
) -> int:
    """NCCL kernels take the group and bytes of the call enqueued last before their launch; how many did."""
    rows = np.flatnonzero((kind == _COLL) & (launch >= 0))
    if not len(rows) or not calls:
        return 0
    created = np.array([c.created_ns for c in calls], dtype=np.int64)
    at = iv["start_ns"].to_numpy(np.int64)[launch[rows]]
    pick = np.searchsorted(created, at + PAIR_SLACK_NS, side="right") - 1
    ok = pick >= 0
    for row, p in zip(rows[ok].tolist(), pick[ok].tolist(), strict=True):
        call = calls[p]
        edits.groups[row] = call.group
        if edits.bytes[row] <= 0:
            edits.bytes[row] = call.bytes
    return int(ok.sum())


def _runs(trace: Trace, kind: np.ndarray, launch: np.ndarray, python: frozenset[int]) -> _Runs:
    """The runs on comm threads: CPU lanes of threads Python never ran on, that launched no kernel and
    waited at least once (module docstring)."""
    iv = trace.intervals
    lane = iv["lane"].to_numpy(np.int64)
    start, end = iv["start_ns"].to_numpy(np.int64), iv["end_ns"].to_numpy(np.int64)
    kernels = np.flatnonzero(np.isin(kind, _KERNELS) & (launch >= 0))
    launching = set(np.unique(lane[launch[kernels]]).tolist())
    copies = np.flatnonzero(np.isin(kind, COPY_CODES) & (launch >= 0))
    h2d = copies[kind[copies] == KIND_CODE["memcpy_h2d"]]
    copied = np.bincount(launch[h2d], weights=iv["bytes"].to_numpy(np.float64)[h2d], minlength=len(iv))
    waiting = set(np.unique(lane[kind == _SYNC]).tolist())
    names = iv["name"].astype(str).to_numpy(dtype=object) if waiting else np.zeros(0, dtype=object)
    parts: list[tuple[int, int, int, int, np.ndarray]] = []
    for li, ln in enumerate(trace.lanes):
        if ln.kind is not LaneKind.CPU_THREAD or ln.ident in python or li in launching or li not in waiting:
            continue
        mine = np.flatnonzero(lane == li)
        mine = mine[np.argsort(start[mine], kind="stable")]
        record = np.array([n.startswith(RECORD_CALLS) for n in names[mine].tolist()], dtype=bool)
        first = run_starts(kind[mine] == _SYNC, copied[mine] > 0, record)
        for rows in np.split(mine, first)[1:]:  # the rows before the first run's are none
            parts.append((li, int(start[rows].min()), int(end[rows].max()), int(copied[rows].sum()), rows))
    parts.sort(key=lambda p: p[1])
    return _Runs(
        np.array([p[0] for p in parts], dtype=np.int64),
        np.array([p[1] for p in parts], dtype=np.int64),
        np.array([p[2] for p in parts], dtype=np.int64),
        np.array([p[3] for p in parts], dtype=np.int64),
        [p[4] for p in parts],
    )


def run_starts(sync: np.ndarray, copy: np.ndarray, record: np.ndarray) -> np.ndarray:
    """Positions where a worker thread's runs start, from its rows in time order: ``sync`` (a wait),
    ``copy`` (launched a host-to-device copy), ``record`` (an event record). A run starts at a wait that does
    not follow another (gloo waits for its copies to the host, then runs), or at a copy that follows a copy
    and its event record (the copy back of a collective that did not wait: a broadcast's receiving rank),
    or at the thread's first copy."""
    starts = []
    copied = recorded = False
    for i in range(len(sync)):  # the rows of gloo's worker threads: a few per collective
        if sync[i]:
            if i == 0 or not sync[i - 1]:
                starts.append(i)
            copied = recorded = False
        elif copy[i]:
            if recorded or not starts:
                starts.append(i)
            copied, recorded = True, False
        elif record[i] and copied:
            recorded = True
    return np.array(starts, dtype=np.int64)


def _pair(runs: _Runs, calls: Sequence[CollectiveCall]) -> list[CollectiveCall | None]:
    """Per run (in start order): the gloo call it ran, or None. Calls run in the order they were enqueued;
    a call passed over (no run has its bytes: a collective of host tensors, which launches nothing) is not
    taken later."""
    out: list[CollectiveCall | None] = []
    j = 0
    for start, nbytes in zip(runs.start.tolist(), runs.bytes.tolist(), strict=True):
        hit = None
        k = j
        while k < len(calls) and calls[k].created_ns <= start + RUN_SLACK_NS:
            if not nbytes or not calls[k].bytes or calls[k].bytes == nbytes:
                hit = k
                break
            k += 1
        out.append(calls[hit] if hit is not None else None)
        j = hit + 1 if hit is not None else j
    return out


def _enqueue_copies(
    edits: _Edits, call: CollectiveCall, threads: Threads, calls: Sequence[CollectiveCall]
) -> np.ndarray:
    """Launch rows of the copies the enqueuing thread made of ``call``'s tensors: gloo makes the work (which
    starts its copies to the host) and then enqueues it, so on the call's thread, in the ENQUEUE_NS before
    the call's enqueue and after the thread's previous call."""
    tid = threads.native.get(call.thread, call.thread)
    earlier = [c.created_ns for c in calls if c.thread == call.thread and c.created_ns < call.created_ns]
    since = max([call.created_ns - ENQUEUE_NS, *earlier[-1:]])
    lo, hi = np.searchsorted(edits.copy_launch_start, [since, call.created_ns + PAIR_SLACK_NS])
    rows = edits.copy_launch[lo:hi]
    return rows[edits.copy_launch_tid[lo:hi] == tid]


def _with_collectives(trace: Trace, rows: list[dict[str, Any]]) -> Trace:
    """The host-run collectives added as ``collective`` intervals on their comm lanes, ids renumbered."""
    iv = trace.intervals
    add = pd.DataFrame(rows)
    lane = add["lane"].to_numpy(np.int64)
    first_id = int(iv["id"].max()) + 1
    add = add.assign(
        id=np.arange(first_id, first_id + len(add), dtype=np.int64),
        rank=trace.lanes[0].rank,
        lane_kind=LaneKind.COMM_STREAM.value,
        stream=[trace.lanes[i].ident for i in lane],
        lane_label=[trace.lanes[i].label for i in lane],
        kind="collective",
        step=step_at(trace.markers, add["start_ns"].to_numpy(np.int64)),
    )
    frame = concat_keeping_codes(iv, conform_intervals(add)[iv.columns])
    return _relabel_frame(replace(trace, intervals=conform_intervals(renumber_by_start(frame))))


def _relabel_frame(trace: Trace) -> Trace:
    """``trace`` with its intervals' ``lane_label`` read again from its lanes (relabelled here)."""
    frame = trace.intervals.copy(deep=False)
    labels = [ln.label for ln in trace.lanes]
    distinct = list(dict.fromkeys(labels))
    code = np.array([distinct.index(x) for x in labels], dtype=np.int64)
    frame["lane_label"] = pd.Categorical.from_codes(
        code[frame["lane"].to_numpy(np.int64)], categories=pd.Index(distinct, dtype=object)
    )
    return replace(trace, intervals=frame)
