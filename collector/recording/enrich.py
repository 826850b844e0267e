"""Join what the recorder's Python hooks saw to a CUPTI-timed trace: causes, lines, names, steps, labels.

Input: the :class:`~collector.model.Trace` the Kineto importer made of the capture (GPU intervals and
runtime calls on Kineto's clock, ``cpu_op`` rows only where op naming was on) and :class:`HostFacts`, the
recorder's own observations already moved onto that clock. Output: the same intervals with

* ``cause`` and ``source`` of every runtime wait (``sync_wait``) inside a cause span (collector.recording.hostspans):
  the outermost span on the same thread wins, as in the Python call stack; boolean-mask indexing, wrapped
  only while ops were named, lends its cause and line to later waits after a kernel of the same op;
* ``source`` of every copy (and of its launch) started inside a copy or cause span;
* GPU work named by the ``aten::`` op that launched it: exactly where the op was recorded, else by the op
  that launched the same kernel most often while naming was on, else (Triton's kernels) after the
  ``torch.compile`` graph call it was launched in (``notes.op_names`` says which; collector.recording.gpunames);
* ``annotation`` rows for ``record_function`` / NVTX ranges, steps from the recorder's marks (GPU work
  belongs to the step that launched it), lanes labelled with thread and stream names.

Everything is vectorized over intervals; loops run over threads, lanes or distinct names only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from collector.importers.frames import appended_by_start, renumber_by_start
from collector.importers.kineto_lanes import lookup_first
from collector.importers.kineto_sync import latest_start, outermost_enclosing
from collector.model import (
    COPY_CODES,
    GPU_CODES,
    INTERVAL_KIND_DTYPE,
    KIND_CODE,
    NO_STEP,
    Lane,
    LaneKind,
    MarkerKind,
    RunMeta,
    Trace,
    conform_markers,
    conformed,
    empty_markers,
    stack_lane_ident,
    step_at,
)
from collector.recording.dropped import first_covered, without_windows
from collector.recording.gpunames import Strings, op_names, region_names
from collector.recording.hostspans import WINDOW_CAUSES

SPAN_SLACK_NS = 20_000
"""A runtime wait starting this close outside a Python call's span still belongs to it: Kineto's host times
and the recorder's (monotonic, mapped onto Kineto's clock) were seen a few microseconds apart, as much as a
short ``synchronize`` lasts."""


@dataclass(frozen=True)
class HostFacts:
    """The recorder's observations, times in ns on the trace's clock.

    ``spans``: (tid, cause, start_ns, end_ns, source, bytes) per outermost waiting/copying Python call (cause
    ``""`` for a copy; bytes of the tensor it moved, 0 if none); ``annotations``: (tid, name, start_ns,
    end_ns); ``markers``: (kind, name, start_ns, end_ns, step); ``threads``: OS thread id -> label;
    ``stream_names``: (device, stream id) -> label; ``stream_tags``: (start_ns, end_ns, label) of each
    4-byte device-to-device copy the recorder launched on a named stream (CUPTI numbers streams its own way);
    ``dropped``: (start_ns, end_ns) windows of host work that is not the workload's (the recorder's own calls,
    steps skipped by ``every``): host rows starting inside one are dropped with the GPU work they launched;
    ``samples``: (start_ns, end_ns, folded stack) stretches of the sampled thread's Python stack
    (collector.recording.stacks), put on a lane of their own beside ``sampled_thread``'s;
    ``regions``: (tid, name, start_ns, end_ns) of each call of a ``torch.compile``d graph (annotations; the
    GPU work launched inside one and named by no op is named after it).
    """

    spans: Sequence[tuple[int, str, int, int, str, int]] = ()
    annotations: Sequence[tuple[int, str, int, int]] = ()
    markers: Sequence[tuple[str, str, int, int, int]] = ()
    threads: Mapping[int, str] = field(default_factory=dict)
    stream_names: Mapping[tuple[int, int], str] = field(default_factory=dict)
    stream_tags: Sequence[tuple[int, int, str]] = ()
    dropped: Sequence[tuple[int, int]] = ()
    samples: Sequence[tuple[int, int, str]] = ()
    sampled_thread: int = 0
    regions: Sequence[tuple[int, str, int, int]] = ()


def enrich(trace: Trace, facts: HostFacts, meta: RunMeta) -> Trace:
    """The trace with the recorder's causes, lines, op names, annotations, steps and labels (module doc)."""
    lanes = list(trace.lanes)
    host_lane = np.array([ln.kind is LaneKind.CPU_THREAD for ln in lanes] + [False], dtype=bool)
    iv = trace.intervals
    if not iv["id"].is_monotonic_increasing:  # the importers write rows in id order
        iv = iv.sort_values("id").reset_index(drop=True)
    tagged = _tagged_streams(iv, facts.stream_tags)
    iv = without_windows(iv, facts.dropped, host_lane)
    kind = iv["kind"].cat.codes.to_numpy()
    start = iv["start_ns"].to_numpy(np.int64)
    lane = iv["lane"].to_numpy(np.int32)
    is_host = host_lane[lane]
    tid = np.where(is_host, iv["stream"].to_numpy(np.int64), -1)
    launch = lookup_first(iv["id"].to_numpy(np.int64), iv["launch_id"].to_numpy(np.int64))
    main_lane = _main_host_lane(lanes, lane, is_host)
    thread_of = _thread_matcher(set(pd.unique(tid[is_host]).tolist()), set(facts.threads))

    cause, source = Strings(iv["cause"]), Strings(iv["source"])
    sp = pd.DataFrame(list(facts.spans), columns=["tid", "cause", "start_ns", "end_ns", "source", "bytes"])
    sp_key = thread_of(sp["tid"].to_numpy(np.int64))
    sp_s, sp_e = sp["start_ns"].to_numpy(np.int64), sp["end_ns"].to_numpy(np.int64)
    span_cause = cause.codes_of([c or "blocking_copy" for c in sp["cause"].tolist()])
    span_source = source.codes_of([str(x) for x in sp["source"].tolist()])
    key = thread_of(tid)

    # sync waits: cause and line of the outermost enclosing span
    sync = np.flatnonzero(kind == KIND_CODE["sync_wait"])
    hit = outermost_enclosing(sp_key, sp_s, sp_e, key[sync], start[sync])
    near = np.flatnonzero(hit < 0)  # a short call's wait just outside its span: the two clocks differ a little
    if len(near):
        slack = SPAN_SLACK_NS
        hit[near] = outermost_enclosing(sp_key, sp_s - slack, sp_e + slack, key[sync[near]], start[sync[near]])
    found = hit >= 0
    cause.codes[sync[found]] = span_cause[hit[found]]
    source.codes[sync[found]] = span_source[hit[found]]
    waited_spans = np.unique(hit[found])

    # copies: the line of the span their launch sat in, on the launch and on the copy
    copies = np.flatnonzero(np.isin(kind, COPY_CODES) & (launch >= 0))
    lpos = launch[copies]
    hit = outermost_enclosing(sp_key, sp_s, sp_e, key[lpos], start[lpos])
    ok = hit >= 0
    own = source.codes[lpos[ok]]
    source.codes[lpos[ok]] = np.where(own != source.code(""), own, span_source[hit[ok]])
    source.codes[copies[ok]] = span_source[hit[ok]]
    # a host copy is non-blocking only from pinned memory with no wait inside its call
    non_blocking = iv["non_blocking"].to_numpy(bool).copy()
    pinned = (iv["memory_kind"] == "pinned").to_numpy(bool)
    host_copy = np.isin(kind[copies], [KIND_CODE["memcpy_h2d"], KIND_CODE["memcpy_d2h"]])
    waited = ok & np.isin(hit, waited_spans)
    non_blocking[copies] &= host_copy & pinned[copies] & ~waited
    nbytes = iv["bytes"].to_numpy(np.int64).copy()
    per_span = np.bincount(hit[ok], minlength=len(sp) + 1)
    one = ok & (per_span[np.maximum(hit, 0)] == 1)  # the span's only copy
    fill = one & (nbytes[copies] == 0)
    nbytes[copies[fill]] = sp["bytes"].to_numpy(np.int64)[hit[fill]]

    names = Strings(iv["name"])
    work = np.flatnonzero(np.isin(kind, GPU_CODES) & (launch >= 0))
    named_before = names.codes[work].copy()
    how = op_names(names, kind, start, iv["end_ns"].to_numpy(np.int64), key, launch)
    unnamed = work[names.codes[work] == named_before]
    region_key = thread_of(np.array([r[0] for r in facts.regions], dtype=np.int64))
    in_regions = region_names(names, unnamed, key[launch[unnamed]], start[launch[unnamed]], facts.regions, region_key)
    if in_regions:
        how += f"; {in_regions} by their compiled region"
    _window_causes_by_op(sync[~found], sync[found], key, start, kind, launch, names, cause, source)
    _label_setup(names, is_host)

    frame = iv.assign(
        name=names.categorical(),
        cause=cause.categorical(),
        source=source.categorical(),
        bytes=nbytes,
        non_blocking=non_blocking,
    )
    regions = [(t, n, a, b) for t, n, a, b in facts.regions]
    frame, lanes = _with_annotations(frame, lanes, [*facts.annotations, *regions], thread_of, main_lane, facts)
    steps = _markers(trace, facts.markers)
    frame["step"] = _steps_of(frame, steps)
    lanes = _labels(lanes, tagged, main_lane, facts.threads)
    distinct = list(dict.fromkeys(ln.label for ln in lanes))
    lane_code = np.array([distinct.index(ln.label) for ln in lanes], dtype=np.int64)
    frame["lane_label"] = pd.Categorical.from_codes(
        lane_code[frame["lane"].to_numpy(np.int32)], categories=pd.Index(distinct, dtype=object)
    )
    notes = {**dict(meta.notes), "op_names": how}
    out_meta = replace(meta, notes=notes)
    return Trace(out_meta, tuple(lanes), conformed(frame), steps)


def _window_causes_by_op(
    bare: np.ndarray,
    spanned: np.ndarray,
    key: np.ndarray,
    start: np.ndarray,
    kind: np.ndarray,
    launch: np.ndarray,
    names: Strings,
    cause: Strings,
    source: Strings,
) -> None:
    """Waits outside any span (rows ``bare``) that follow a kernel of the op that the waits of a window-only
    cause (collector.recording.hostspans.WINDOW_CAUSES: reported while ops were named) followed take that
    cause, and its line where those waits had one line: boolean-mask indexing in later steps (in place).
    The op of a wait is the op named on the last kernel its thread launched before it."""
    window = [cause.labels.index(c) for c in WINDOW_CAUSES if c in cause.labels]
    if not window or not len(bare):
        return
    learned = spanned[np.isin(cause.codes[spanned], window)]
    if not len(learned):
        return
    kernels = np.flatnonzero((kind == KIND_CODE["kernel"]) & (launch >= 0))
    by_launch = launch[kernels]
    waits = np.concatenate([learned, bare])
    last = latest_start(key[by_launch], start[by_launch], key[waits], start[waits])
    op = np.where(last >= 0, names.codes[kernels[np.maximum(last, 0)]], -1)
    rows = zip(op[: len(learned)].tolist(), cause.codes[learned].tolist(), source.codes[learned].tolist(), strict=True)
    seen: dict[int, set[tuple[int, int]]] = {}
    for o, c, line in rows:
        if o >= 0:
            seen.setdefault(o, set()).add((c, line))
    by_op_cause = np.full(len(names.labels) + 1, -1, dtype=np.int64)  # the last slot answers op -1
    by_op_source = by_op_cause.copy()
    for o, pairs in seen.items():
        causes, lines = {c for c, _ in pairs}, {line for _, line in pairs}
        if len(causes) == 1:
            by_op_cause[o] = causes.pop()
            by_op_source[o] = lines.pop() if len(lines) == 1 else -1
    bare_op = op[len(learned) :]
    told, lined = by_op_cause[bare_op] >= 0, by_op_source[bare_op] >= 0
    cause.codes[bare[told]] = by_op_cause[bare_op[told]]
    source.codes[bare[lined]] = by_op_source[bare_op[lined]]


SETUP_CALLS = re.compile(
    r"^(Lazy Function Loading|cu(Module|Library)(Load\w*|GetFunction\w*)|cudaGetDeviceProperties\w*)$"
)
"""Host calls that are first-call set-up: lazy loading of a kernel's module on its first launch, module and
library loads. Labelled ``first-call set-up: <call>`` on the CPU lane (the GPU is idle meanwhile)."""


def _label_setup(names: Strings, is_host: np.ndarray) -> None:
    """Host calls that are first-call set-up relabelled ``first-call set-up: <call>`` (in place)."""
    setup = [i for i, n in enumerate(names.labels) if SETUP_CALLS.match(n)]
    if not setup:
        return
    relabel = np.arange(len(names.labels), dtype=np.int64)
    for i in setup:
        relabel[i] = names.code(f"first-call set-up: {names.labels[i]}")
    names.codes[is_host] = relabel[names.codes[is_host]]


def drop_empty_last_step(trace: Trace, step: int) -> Trace:
    """Without the marker of step ``step`` when no GPU work was launched in it (the recording stopped
    right after a step boundary); its host rows join the tail (step -1)."""
    iv, mk = trace.intervals, trace.markers
    in_step = (iv["step"] == step).to_numpy()
    gpu = (iv["lane_kind"] != LaneKind.CPU_THREAD.value).to_numpy()
    if (in_step & gpu).any():
        return trace
    keep = ~((mk["kind"] == MarkerKind.STEP.value) & (mk["step"] == step)).to_numpy()
    frame = iv.assign(step=np.where(in_step, NO_STEP, iv["step"].to_numpy()).astype(np.int32))
    return replace(trace, intervals=frame, markers=mk[keep].reset_index(drop=True))


def without_setup_steps(trace: Trace, windows: Sequence[tuple[int, int]]) -> Trace:
    """Without the step marks that overlap set-up ``windows`` ((start_ns, end_ns): torch.compile compiling,
    autotuning, recording CUDA graphs): their rows join no step (the set-up, when they lead), and the steps
    kept are numbered from 0 again."""
    mk = trace.markers
    is_step = (mk["kind"] == MarkerKind.STEP.value).to_numpy(bool)
    if not len(windows) or not is_step.any():
        return trace
    w = np.asarray(windows, dtype=np.int64).reshape(-1, 2)
    s, e = mk["start_ns"].to_numpy(np.int64), mk["end_ns"].to_numpy(np.int64)
    drop = is_step & ((w[None, :, 0] < e[:, None]) & (w[None, :, 1] > s[:, None])).any(axis=1)
    if not drop.any():
        return trace
    number = mk["step"].to_numpy(np.int64)
    kept = is_step & ~drop
    order = np.argsort(s[kept], kind="stable")
    renumber = np.full(int(max(number.max(), 0)) + 2, NO_STEP, dtype=np.int64)  # the last slot: NO_STEP itself
    renumber[number[kept][order]] = np.arange(int(kept.sum()))
    marks = mk[~drop].copy()
    marks["step"] = renumber[marks["step"].to_numpy(np.int64)]
    steps = (marks["kind"] == MarkerKind.STEP.value).to_numpy(bool)
    marks.loc[steps, "name"] = [f"step {k}" for k in marks.loc[steps, "step"]]
    frame = trace.intervals.assign(step=renumber[trace.intervals["step"].to_numpy(np.int64)].astype(np.int32))
    return replace(trace, intervals=frame, markers=conform_markers(marks.reset_index(drop=True)))


def _main_host_lane(lanes: Sequence[Lane], lane: np.ndarray, is_host: np.ndarray) -> int:
    """The CPU lane with the most rows (the thread that issued the work), or -1 if there is none."""
    host_lanes = [i for i, ln in enumerate(lanes) if ln.kind is LaneKind.CPU_THREAD]
    if not host_lanes:
        return -1
    counts = np.bincount(lane[is_host], minlength=len(lanes)) if is_host.any() else np.zeros(len(lanes), int)
    return max(host_lanes, key=lambda i: counts[i])


@dataclass(frozen=True)
class _Threads:
    """Key for thread ids: the ids themselves when the trace reports OS thread ids (``matched``), else one
    key for all (Kineto may number threads its own way; then waits are matched by time alone)."""

    matched: bool

    def __call__(self, tids: np.ndarray) -> np.ndarray:
        t = np.asarray(tids, dtype=np.int64)
        return t if self.matched else np.zeros(len(t), dtype=np.int64)


def _thread_matcher(trace_tids: set[int], our_tids: set[int]) -> _Threads:
    return _Threads(bool(trace_tids & our_tids))


def _markers(trace: Trace, rows: Sequence[tuple[str, str, int, int, int]]) -> pd.DataFrame:
    if not rows:
        return trace.markers if len(trace.markers) else empty_markers()
    rank = trace.lanes[0].rank if trace.lanes else 0
    frame = pd.DataFrame(list(rows), columns=["kind", "name", "start_ns", "end_ns", "step"])
    frame["kind"] = [MarkerKind(k).value for k in frame["kind"]]
    frame["rank"] = rank
    return conform_markers(frame)


def _steps_of(frame: pd.DataFrame, markers: pd.DataFrame) -> np.ndarray:
    """Each row's step: by its start time, GPU work the step of the launch that queued it, and a GPU-side
    range (launched by nothing) the step of the first launched work it covers on its stream."""
    start = frame["start_ns"].to_numpy(np.int64)
    step = step_at(markers, start)
    launch = lookup_first(frame["id"].to_numpy(np.int64), frame["launch_id"].to_numpy(np.int64))
    linked = launch >= 0
    step[linked] = step[launch[linked]]
    on_gpu = (frame["lane_kind"] != LaneKind.CPU_THREAD.value).to_numpy(bool)
    lane, end = frame["lane"].to_numpy(np.int64), frame["end_ns"].to_numpy(np.int64)
    hit = first_covered(lane, start, end, on_gpu & linked, on_gpu & ~linked)
    ranges = np.flatnonzero(on_gpu & ~linked)
    step[ranges[hit >= 0]] = step[hit[hit >= 0]]
    return step


SAMPLES_LABEL = "Python stack (sampled)"
"""Label of the lane that holds a thread's sampled stacks (after the thread's own label)."""


def _with_annotations(
    frame: pd.DataFrame,
    lanes: list[Lane],
    rows: Sequence[tuple[int, str, int, int]],
    thread_of: _Threads,
    main_lane: int,
    facts: HostFacts,
) -> tuple[pd.DataFrame, list[Lane]]:
    """Annotation rows appended on their thread's lane (the main lane when threads cannot be matched), and
    sampled stacks on a lane of their own (ident: :func:`collector.model.stack_lane_ident` of the sampled
    thread's)."""
    if not rows and not facts.samples:
        return renumber_by_start(frame), lanes
    lanes = list(lanes)
    rank = lanes[0].rank if lanes else 0
    lane_of: list[int] = []
    by_ident = {ln.ident: i for i, ln in enumerate(lanes) if ln.kind is LaneKind.CPU_THREAD}
    for t, _, _, _ in rows:
        if thread_of.matched and t in by_ident:
            lane_of.append(by_ident[t])
        elif not thread_of.matched and main_lane >= 0:
            lane_of.append(main_lane)
        else:
            by_ident[t] = len(lanes)
            lanes.append(Lane(rank, LaneKind.CPU_THREAD, int(t), f"thread {t}"))
            lane_of.append(by_ident[t])
    if facts.samples:
        ident = stack_lane_ident(int(facts.sampled_thread or (lanes[main_lane].ident if main_lane >= 0 else 0)))
        lanes.append(Lane(rank, LaneKind.CPU_THREAD, ident, f"main thread: {SAMPLES_LABEL}"))
        lane_of += [len(lanes) - 1] * len(facts.samples)
    kinds = [KIND_CODE["annotation"]] * len(rows) + [KIND_CODE["sample"]] * len(facts.samples)
    spans = [(n, a, b) for _, n, a, b in rows] + [(n, a, b) for a, b, n in facts.samples]
    names, starts, ends = zip(*spans, strict=True)
    added = {
        "rank": rank,
        "lane": np.array(lane_of, dtype=np.int32),
        "lane_kind": LaneKind.CPU_THREAD.value,
        "stream": np.array([lanes[i].ident for i in lane_of], dtype=np.int64),
        "kind": pd.Categorical.from_codes(np.array(kinds, dtype=np.int8), dtype=INTERVAL_KIND_DTYPE),
        "name": [str(n) for n in names],
        "start_ns": starts,
        "end_ns": ends,
    }
    return appended_by_start(frame, added, len(spans)), lanes


def _tagged_streams(frame: pd.DataFrame, tags: Sequence[tuple[int, int, str]]) -> dict[int, str]:
    """Stream id -> label: the stream of the device-to-device copy launched inside each tag's time."""
    if not tags:
        return {}
    memset = frame[(frame["kind"] == "memcpy_d2d").to_numpy(bool)]
    launch_start = frame.set_index("id")["start_ns"]
    starts = launch_start.reindex(memset["launch_id"]).to_numpy()
    out: dict[int, str] = {}
    for t0, t1, label in tags:  # a few named streams
        hit = np.flatnonzero((starts >= t0) & (starts <= t1))
        if len(hit):
            out[int(memset["stream"].iloc[hit[0]])] = label
    return out


def _labels(
    lanes: Sequence[Lane], streams: Mapping[int, str], main_lane: int, threads: Mapping[int, str]
) -> list[Lane]:
    """Thread labels from the recorder; when no lane's id is one of its threads' (Kineto numbered them its own
    way), the issuing thread is "main thread". Named streams keep their role in the label."""
    matched = any(ln.kind is LaneKind.CPU_THREAD and ln.ident in threads for ln in lanes)
    out = []
    for i, ln in enumerate(lanes):
        label = ln.label
        if ln.kind is LaneKind.CPU_THREAD:
            label = threads.get(ln.ident) or ("main thread" if i == main_lane and not matched else label)
        elif ln.ident in streams:
            label = f"stream {ln.ident} {streams[ln.ident]} ({ln.kind.value.split('_')[0]})"
        out.append(replace(ln, label=label))
    return out
