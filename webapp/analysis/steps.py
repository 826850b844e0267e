"""Step windows: where each step of each rank begins and ends on the run clock.

Steps come from ``step`` markers. A trace without them (a torch.profiler trace recorded without
``prof.step()``) may still mark its steps with ``record_function("step N")``: CPU-lane annotations named
like :data:`STEP_ANNOTATION` then serve as markers, and GPU work belongs to the step that launched it.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from collector.model import KIND_CODE, IntervalKind, LaneKind, Trace
from webapp.analysis import intervals as iv

STEP_ANNOTATION = re.compile(r"^(?:ProfilerStep\s*#\s*|step[\s_#]*|iteration[\s_#]*|iter[\s_#]*)(\d+)$", re.IGNORECASE)
"""Annotation names read as step N when a trace has no step markers: "step 3", "ProfilerStep#3", "iter_3"."""

BASIS = ("gpu", "host", "annotation", "span")
"""How windows were placed: markers moved to the GPU work of each step ("gpu"), the markers themselves
("host"), step annotations moved to the GPU work ("annotation"), or one window per rank ("span")."""

_ANNOTATION = KIND_CODE[IntervalKind.ANNOTATION]


def _annotation_steps(
    trace: Trace, kind: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[pd.DataFrame, np.ndarray]:
    """Markers (rank, step, start_ns, end_ns) from CPU-lane step annotations, and each row's step: the
    annotation holding a host row's start, the launching row's step for GPU work (-1 elsewhere)."""
    df = trace.intervals
    names = df["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype(str).astype("category")
    cats = [str(c) for c in names.cat.categories]
    number = np.array([int(m.group(1)) if (m := STEP_ANNOTATION.match(c)) else -1 for c in cats] + [-1])
    codes = np.asarray(names.cat.codes)
    cpu_lanes = np.array([ln.kind is LaneKind.CPU_THREAD for ln in trace.lanes] + [False])
    lane = np.asarray(df["lane"], dtype=np.int64)
    rows = np.flatnonzero((kind == _ANNOTATION) & (number[codes] >= 0) & cpu_lanes[lane])
    none = np.full(len(df), -1, dtype=np.int64)
    if not len(rows):
        return pd.DataFrame(columns=["rank", "step", "start_ns", "end_ns"], dtype="int64"), none
    marks = pd.DataFrame(
        {
            "rank": np.asarray(df["rank"], dtype=np.int64)[rows],
            "step": number[codes[rows]],
            "start_ns": start[rows],
            "end_ns": end[rows],
        }
    )
    marks = marks.groupby(["rank", "step"], as_index=False).agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
    marks = marks.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    # host rows: the annotation of their rank that holds their start (ranks kept apart by a large offset)
    rank = np.asarray(df["rank"], dtype=np.int64)
    span = int(max(end.max(), marks["end_ns"].max()) - min(start.min(), marks["start_ns"].min())) + 1
    base = int(min(start.min(), marks["start_ns"].min()))
    ms = marks["start_ns"].to_numpy() - base + marks["rank"].to_numpy() * span
    me = marks["end_ns"].to_numpy() - base + marks["rank"].to_numpy() * span
    t = start - base + rank * span
    i = np.searchsorted(ms, t, side="right") - 1
    inside = (i >= 0) & (t < me[np.maximum(i, 0)])
    step = np.where(inside, marks["step"].to_numpy()[np.maximum(i, 0)], -1)
    # GPU work: the step of the row that launched it
    ids = np.asarray(df["id"], dtype=np.int64)
    launch = np.asarray(df["launch_id"], dtype=np.int64)
    n = len(ids)
    if n and ids[0] == 0 and ids[-1] == n - 1 and (ids[1:] > ids[:-1]).all():  # ids are row numbers
        row = np.clip(launch, 0, n - 1)
        linked = (launch >= 0) & (launch < n)
    else:
        order = np.argsort(ids, kind="stable")
        pos = np.minimum(np.searchsorted(ids[order], launch), max(n - 1, 0))
        row = order[pos]
        linked = (launch >= 0) & (ids[row] == launch)
    step = np.where(linked, step[row], np.where(cpu_lanes[lane], step, -1))
    return marks, step


def _gpu_step_bounds(
    rank: np.ndarray, step: np.ndarray, start: np.ndarray, end: np.ndarray, gpu: np.ndarray
) -> pd.DataFrame:
    """First start and last end of the GPU work launched in each (rank, step): rank, step, gpu_start_ns,
    gpu_end_ns."""
    m = gpu & (step >= 0)
    if not m.any():
        return pd.DataFrame({"rank": [], "step": [], "gpu_start_ns": [], "gpu_end_ns": []}, dtype="int64")
    r, st = rank[m], step[m].astype(np.int64)
    n_steps = int(st.max()) + 1
    key = r * n_steps + st
    size = int(key.max()) + 1
    if size > 4 * len(key) + 4096:  # sparse steps: compact the keys first
        uniq, inv = np.unique(key, return_inverse=True)
    else:
        uniq, inv = np.arange(size), key
    lo = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(len(uniq), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(lo, inv, start[m])
    np.maximum.at(hi, inv, end[m])
    present = hi >= lo
    uniq, lo, hi = uniq[present], lo[present], hi[present]
    return pd.DataFrame({"rank": uniq // n_steps, "step": uniq % n_steps, "gpu_start_ns": lo, "gpu_end_ns": hi})


def _spans(rank: np.ndarray, start: np.ndarray, end: np.ndarray, gpu: np.ndarray) -> pd.DataFrame:
    """Each rank's span (rank, start_ns, end_ns): from its first to its last GPU interval, or over all its
    intervals where it has no GPU work (host set-up before the first kernel is not part of the run)."""
    if not len(rank):
        return pd.DataFrame({"rank": [], "start_ns": [], "end_ns": []}, dtype="int64")
    n = int(rank.max()) + 1
    out = []
    for mask in (gpu, np.ones(len(rank), dtype=bool)):
        lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        hi = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(lo, rank[mask], start[mask])
        np.maximum.at(hi, rank[mask], end[mask])
        out.append((lo, hi))
    (glo, ghi), (alo, ahi) = out
    has_gpu = ghi >= glo
    lo, hi = np.where(has_gpu, glo, alo), np.where(has_gpu, ghi, ahi)
    present = np.flatnonzero(hi >= lo)
    return pd.DataFrame({"rank": present, "start_ns": lo[present], "end_ns": hi[present]})


def _with_work(steps: pd.DataFrame, rank: np.ndarray, start: np.ndarray) -> pd.DataFrame:
    """``steps`` without the windows that hold no interval of their rank (a profiler's last step marker, opened
    as it stopped), where their rank has other windows."""
    held = np.zeros(len(steps), dtype=bool)
    if len(start):
        # every rank's starts on one axis, ranks apart (as RunData places them)
        lo, hi = int(start.min()), int(start.max())
        step_rank = steps["rank"].to_numpy(np.int64)
        tb = iv.Timebase.fit(lo, hi, int(max(rank.max(), step_rank.max(initial=0))))
        a = tb.to_axis(step_rank, np.clip(steps["start_ns"].to_numpy(np.int64), lo, hi + 1))
        b = tb.to_axis(step_rank, np.clip(steps["end_ns"].to_numpy(np.int64), lo, hi + 1))
        held = _holding(tb, rank, start, a, b)
    alone = steps.groupby("rank")["step"].transform("size").to_numpy() == 1
    return steps[held | alone]


def _holding(tb: iv.Timebase, rank: np.ndarray, start: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether each window ``[a, b)`` on ``tb``'s axis holds the start of an interval (``rank``, ``start``).
    Windows apart from one another (as step windows tile a rank's time) take each start to the one window it
    can fall in, CHUNK_ROWS rows at a time, without sorting the run; others sort the starts."""
    order = np.argsort(a, kind="stable")
    a_s, b_s = a[order], b[order]
    if not (a_s[1:] >= b_s[:-1]).all():
        key = tb.to_axis(rank, start)
        if not (key[1:] >= key[:-1]).all():
            key.sort()
        return np.searchsorted(key, b, side="left") > np.searchsorted(key, a, side="left")
    windows = iv.Segments.from_sorted(a_s, b_s)
    hit = np.zeros(len(a), dtype=bool)
    for c in range(0, len(start), iv.CHUNK_ROWS):
        at = iv.window_index(windows, tb.to_axis(rank[c : c + iv.CHUNK_ROWS], start[c : c + iv.CHUNK_ROWS]))
        hit[at[at >= 0]] = True
    held = np.empty(len(a), dtype=bool)
    held[order] = hit
    return held


def step_windows(
    trace: Trace,
    kind: np.ndarray,
    rank: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    gpu: np.ndarray,
    compute: np.ndarray,
) -> tuple[pd.DataFrame, str]:
    """Step windows (rank, step, start_ns, end_ns, sorted by rank and start) and their BASIS.

    With markers, a step's window starts where the work launched in that step starts on the streams that
    run kernels (``compute``), and ends where the next step's starts (the last one at the later of its
    marker's end and its GPU work's end): the GPU's pace, which is the job's throughput even when the host
    runs steps ahead. Prefetch copies do not place windows (they run as early as the host issues them).
    Without kernels any GPU work is used; steps without tagged GPU work keep their markers. A rank's only
    marked step spans its marker and its GPU work. A rank without markers is one step spanning its GPU work
    (all its intervals if it has none).
    """
    steps = trace.steps()
    steps = steps[steps["end_ns"] >= steps["start_ns"]].astype("int64")
    step_col = np.asarray(trace.intervals["step"])  # int32: the step tags are converted where taken
    basis = "host" if len(steps) else "span"
    if steps.empty:
        steps, step_col = _annotation_steps(trace, kind, start, end)
        basis = "annotation" if len(steps) else "span"
    if len(steps):
        bounds = _gpu_step_bounds(rank, step_col, start, end, compute)
        if bounds.empty:
            bounds = _gpu_step_bounds(rank, step_col, start, end, gpu)
        # nullable integers: a float column (what a left merge makes of missing values) rounds ns times of
        # 1e18 to 256 ns, and windows would then miss the GPU op that opens them
        bounds = bounds.astype({"gpu_start_ns": "Int64", "gpu_end_ns": "Int64"})
        steps = steps.merge(bounds, on=["rank", "step"], how="left")
        if basis == "host" and steps["gpu_start_ns"].notna().any():
            basis = "gpu"
        ws = steps["gpu_start_ns"].fillna(steps["start_ns"]).astype("int64")
        # a rank's only step has no next one to tile against: it keeps its marker's host time before its GPU
        # work (a one-step profile of a host-bound step is mostly that)
        alone = (steps.groupby("rank")["step"].transform("size") == 1).to_numpy()
        ws = ws.where(~alone, np.minimum(ws, steps["start_ns"])).astype("int64")
        last_end = np.maximum(steps["end_ns"], steps["gpu_end_ns"].fillna(steps["end_ns"])).astype("int64")
        steps = steps.assign(start_ns=ws).sort_values(["rank", "start_ns"], kind="stable")
        nxt = steps.astype({"start_ns": "Int64"}).groupby("rank")["start_ns"].shift(-1)
        steps["end_ns"] = nxt.fillna(last_end.loc[steps.index].astype("Int64")).astype("int64")
        steps = _with_work(steps[["rank", "step", "start_ns", "end_ns"]], rank, start)
    with_steps = set(steps["rank"].tolist())
    if {ln.rank for ln in trace.lanes} <= with_steps:
        return steps.sort_values(["rank", "start_ns"]).reset_index(drop=True).astype("int64"), basis
    spans = _spans(rank, start, end, gpu)
    spans = spans[~spans["rank"].isin(with_steps)]
    spans.insert(1, "step", 0)
    frame = pd.concat([steps, spans], ignore_index=True) if len(spans) else steps
    frame = frame.astype({"rank": "int64", "step": "int64", "start_ns": "int64", "end_ns": "int64"})
    return frame.sort_values(["rank", "start_ns"]).reset_index(drop=True), basis
