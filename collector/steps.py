"""Steps of a run, found when the trace does not mark them: ``find_steps(trace, step_at=None) -> Trace``.

The method that placed the steps goes into ``RunMeta.step_method``:

================== ===================================================================================
``markers``        the trace's own step markers (``rec.step()``, the recorder's optimizer steps,
                   ``ProfilerStep#N``); they win over every method below except ``step_at``
``annotations``    CPU-lane annotations named like "step N" (:data:`STEP_ANNOTATION`); the analysis places
                   them (webapp.analysis.steps)
``step_at:SPEC``   the user's choice (``--step-at SPEC``): ``FILE:LINE`` (a run of host intervals whose
                   source is that line starts a step) or an annotation name (``record_function``/NVTX;
                   each such range starts a step)
``optimizer``      torch's ``Optimizer.step#...`` ranges: each step ends where an optimizer step ends
``repeat:WHAT``    the loop, found as the repeating sequence of WHAT on each rank: ``graph`` (CUDA graph
                   replays, each one token, and the GPU work between them; tried first where a rank
                   replayed graphs), ``source`` (user source lines of host intervals), ``cpu_op`` (names and
                   sources of the ops and waits on the busiest CPU thread, where the ops span most of the
                   run) or ``gpu`` (GPU work names): see :func:`iterations`; a repeat whose iterations
                   keep no pace (:data:`REGULAR_SHARE`) is not taken
``none``           nothing found: the analysis takes each rank's run as one step
================== ===================================================================================

Work before the first step (model to GPU, warm-up) and after the last is left outside every step (step -1):
it is the run's set-up and tail. A step 0 (marked or found) lasting more than :data:`LONG_FIRST_STEP` times
the median of the next few (set-up inside the first step: lazy kernel loading, library initialisation) is
trimmed to that median, except where the steps are graph replays: their set-up (warm-up, capture) is already
outside them, and a first replay's slower launch (the graph's upload) is its own.
Vectorized: the only Python loops run over ranks and a few candidate periods, never over intervals.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from collector.importers import graphs
from collector.importers.frames import launch_rows
from collector.model import (
    GPU_KINDS,
    NO_STEP,
    IntervalKind,
    LaneKind,
    MarkerKind,
    Trace,
    conform_markers,
)

STEP_ANNOTATION = re.compile(r"^(?:ProfilerStep\s*#\s*|step[\s_#]*|iteration[\s_#]*|iter[\s_#]*)(\d+)$", re.IGNORECASE)
"""Annotation names read as step N when a trace has no step markers: "step 3", "ProfilerStep#3", "iter_3"."""
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
"""torch optimizers wrap ``step()`` in ``record_function("Optimizer.step#SGD.step")``."""
MIN_ITERATIONS = 2
"""A sequence must repeat at least this often to be read as a loop."""
MAX_CANDIDATES = 12
"""Iteration counts tried per rank: those shared by the most tokens."""
MIN_MATCH = 0.8
"""Consecutive iterations must agree on this share of their tokens (a loop may branch now and then)."""
NEAR_TIE = 0.9
"""Loops covering at least this share of the best one's tokens tie; the fewest iterations win."""
LONG_FIRST_STEP = 2.0
"""A marked step 0 longer than this many times the median of the FOLLOWING_STEPS after it holds the set-up:
it is trimmed to that median (not a graph replay's: see the module docstring)."""
FOLLOWING_STEPS = 3
"""Steps after step 0 it is compared with (a few: a loop may change pace later)."""
SOURCE_SHARE = 0.5
"""Host intervals repeat by source line when at least this share of them carries a source."""
BOUNDED_NAMING = ("time", "ops", "repeat")
"""``notes.op_naming.stopped_by`` of a recording whose op naming ended before the run did."""
OPS_SPAN_SHARE = 0.5
"""Host ops repeat as the loop only where at least this share of the rank's GPU work was launched while
they were recorded (the recorder names ops in the first step only, or for a bounded time: then the GPU
work's names are read instead)."""
REGULAR_SHARE = 0.5
"""A repeat is a loop only if more than half its iterations last within REGULAR_FACTOR of their median: a
training or inference loop has a pace (an eval or checkpoint step is an outlier, not the rule); a sequence
that recurs at random intervals (a benchmark sweeping sizes, set-up calls) is not a loop."""
REGULAR_FACTOR = 2.0


def find_steps(trace: Trace, step_at: str | None = None) -> Trace:
    """``trace`` with step markers and the ``step`` column set by the first method that applies (module
    docstring) and ``meta.step_method`` naming it. Raises ValueError (one line) when ``step_at`` matches
    nothing in the trace."""
    df = trace.intervals
    if step_at:
        starts, ends = _step_at(trace, step_at)
        if not len(starts):
            raise ValueError(f"--step-at {step_at!r}: no interval has this source line or annotation name")
        return _with_steps(trace, starts, ends, f"step_at:{step_at}")
    if len(trace.steps()):
        found = _repeats(trace, ("graph",)) if graphs.replays_past_marks(trace, MIN_ITERATIONS) else None
        if found is not None:  # the marks were the set-up's (warm-up, capture); the loop replays graphs
            return _trim_first_step(_with_steps(trace, found[0], found[1], "repeat:graph"))
        return _trim_first_step(_tagged(trace).with_meta(step_method=trace.meta.step_method or "markers"))
    if df.empty:
        return trace.with_meta(step_method="none")
    annotation = _kind(df, IntervalKind.ANNOTATION) & _cpu_rows(trace)
    if (annotation & _matches(df["name"], STEP_ANNOTATION)).any():
        return trace.with_meta(step_method="annotations")
    opt = annotation & _matches(df["name"], OPTIMIZER_STEP)
    if opt.any():
        starts, ends = _optimizer_steps(df[opt], _rank_spans(df))
        if len(starts):
            return _trim_first_step(_with_steps(trace, starts, ends, "optimizer"))
    found = _repeats(trace)
    if found is not None:
        starts, ends, what = found
        return _trim_first_step(_with_steps(trace, starts, ends, f"repeat:{what}"))
    return trace.with_meta(step_method="none")


# ------------------------------------------------------------------------------------ the period finder


def iterations(tokens: np.ndarray, collapse: bool = False) -> tuple[np.ndarray, int] | None:
    """The loop in a sequence of tokens (int codes in time order): the position where each iteration starts
    and the position of the last iteration's last token, or None when nothing repeats MIN_ITERATIONS times.

    A loop of K iterations shows as tokens seen exactly K times. For each such K (the MAX_CANDIDATES counts
    shared by most tokens), the earliest of those tokens anchors the iterations and the period is the median
    distance between its occurrences; K holds when consecutive iterations agree token by token on at least
    MIN_MATCH of the period. Iteration 0 reaches back, and the last one forward, as far as the sequence
    keeps repeating (set-up and tail lie outside). Of the K that hold, the one covering the most tokens
    wins, the smallest among near ties (an outer loop over an inner one). ``collapse`` first merges runs of
    one token (the ops of one source line).
    """
    pos = np.arange(len(tokens))
    if collapse and len(tokens):
        pos = np.flatnonzero(np.concatenate(([True], tokens[1:] != tokens[:-1])))
    if len(pos) < 2 * MIN_ITERATIONS:
        return None
    _, x = np.unique(tokens[pos], return_inverse=True)
    counts = np.bincount(x)
    values, n_tokens = np.unique(counts[counts >= MIN_ITERATIONS], return_counts=True)
    found = []
    for i in np.argsort(-n_tokens, kind="stable")[:MAX_CANDIDATES]:
        period = _periodic(x, counts, int(values[i]))
        if period is not None:
            found.append(period)
    if not found:
        return None
    most = max(covered for _, _, covered in found)
    starts, last, _ = min((f for f in found if f[2] >= NEAR_TIE * most), key=lambda f: len(f[0]))
    end = pos[last + 1] - 1 if last + 1 < len(pos) else len(tokens) - 1
    return pos[starts], int(end)


def _periodic(x: np.ndarray, counts: np.ndarray, k: int) -> tuple[np.ndarray, int, int] | None:
    """Iteration starts, last token and tokens covered for K = ``k`` iterations, or None if they disagree."""
    n = len(x)
    first_seen = np.full(len(counts), n, dtype=np.int64)
    np.minimum.at(first_seen, x[::-1], np.arange(n - 1, -1, -1))
    anchor_token = int(np.argmin(np.where(counts == k, first_seen, n)))
    a = np.flatnonzero(x == anchor_token)
    length = int(np.median(np.diff(a)))
    if length < 1:
        return None
    step = np.arange(length)
    here, there = a[:-1, None] + step, a[1:, None] + step
    same = (x[np.minimum(here, n - 1)] == x[np.minimum(there, n - 1)]) & (there < n)
    if same.mean() < MIN_MATCH:
        return None
    back = min(length - 1, int(a[0]))
    m = int(np.cumprod(x[a[0] - 1 - np.arange(back)] == x[a[1] - 1 - np.arange(back)]).sum()) if back else 0
    starts = a - m
    ahead = np.minimum(starts[-2] + step, n - 1), np.minimum(starts[-1] + step, n - 1)
    f = int(np.cumprod((x[ahead[0]] == x[ahead[1]]) & (starts[-1] + step < n)).sum())
    last = int(starts[-1]) + max(f, 1) - 1
    return starts, last, last - int(starts[0]) + 1


# ------------------------------------------------------------------------------------ methods


def _repeats(trace: Trace, methods: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Per-rank loops by graph replays, source lines, CPU op names or GPU work names (or ``methods`` alone):
    (rank, start_ns), (rank, end_ns), what. Graph replays come first where a rank replayed CUDA graphs: its
    host then issues little besides the replays, each of which is one token (collector.importers.graphs)."""
    df = trace.intervals
    cpu = _cpu_rows(trace)
    host = cpu & (_kind(df, IntervalKind.CPU_OP) | _kind(df, IntervalKind.LAUNCH) | _kind(df, IntervalKind.SYNC_WAIT))
    ops = cpu & (_kind(df, IntervalKind.CPU_OP) | _kind(df, IntervalKind.SYNC_WAIT))
    gpu = np.isin(df["kind"].astype(str).to_numpy(), [k.value for k in GPU_KINDS])
    has_source = _strings(df["source"]).to_numpy() != ""
    launch_start = _launch_start(df)
    n_sources = int(_codes(df["source"], np.arange(len(df))).max(initial=0)) + 1
    start, end, rank_of = df["start_ns"].to_numpy(), df["end_ns"].to_numpy(), df["rank"].to_numpy()
    naming = (trace.meta.notes or {}).get("op_naming") or {}
    bounded = isinstance(naming, dict) and naming.get("stopped_by") in BOUNDED_NAMING
    if not methods:
        methods = ("source", "cpu_op", "gpu")
        if graphs.has_graph_replays(df, MIN_ITERATIONS):
            methods = ("graph", *methods)
    for what in methods:
        starts, ends = [], []
        for rank in np.unique(rank_of):
            mine = rank_of == rank
            collapse = False
            if what == "graph":
                tokens = graphs.replay_tokens(df, np.flatnonzero(mine & gpu), MIN_ITERATIONS)
                if tokens is None:
                    continue
                codes, t0, t1 = tokens
            elif what == "source":
                rows = np.flatnonzero(mine & host)
                if not len(rows) or has_source[rows].mean() < SOURCE_SHARE:
                    continue
                rows = rows[has_source[rows]]
                codes, t0, t1 = _codes(df["source"], rows), start[rows], end[rows]
                collapse = True
            elif what == "cpu_op":
                rows = np.flatnonzero(mine & ops)
                gpu_rows = np.flatnonzero(mine & gpu)
                if not len(rows) or not _ops_span_the_run(df, rows, gpu_rows, launch_start, bounded):
                    continue
                lanes, n = np.unique(df["lane"].to_numpy()[rows], return_counts=True)
                rows = rows[df["lane"].to_numpy()[rows] == lanes[np.argmax(n)]]
                codes = _codes(df["name"], rows) * (n_sources + 1) + _codes(df["source"], rows) + 1
                t0, t1 = start[rows], end[rows]
            else:
                rows = np.flatnonzero(mine & gpu)
                codes, t0, t1 = _codes(df["name"], rows), launch_start[rows], end[rows]
            order = np.lexsort((np.arange(len(t0)), t0))
            codes, t0, t1 = codes[order], t0[order], t1[order]
            found = iterations(codes, collapse)
            if found is None:
                continue
            first, last = found
            if not _paced(np.append(t0[first], t1[first[-1] : last + 1].max())):
                continue
            starts.append(np.stack([np.full(len(first), rank), t0[first]], axis=1))
            ends.append(np.array([[rank, int(t1[first[-1] : last + 1].max())]]))
        if starts:
            return np.concatenate(starts), np.concatenate(ends), what
    return None


def _paced(bounds: np.ndarray) -> bool:
    """Whether iterations between consecutive ``bounds`` (ns) keep a pace: more than REGULAR_SHARE of them last within
    REGULAR_FACTOR of their median."""
    dur = np.diff(bounds.astype(np.float64))
    mid = float(np.median(dur)) if len(dur) else 0.0
    if mid <= 0:
        return False
    near = (dur <= REGULAR_FACTOR * mid) & (dur >= mid / REGULAR_FACTOR)
    return float(near.mean()) > REGULAR_SHARE


def _ops_span_the_run(
    df: pd.DataFrame, rows: np.ndarray, gpu: np.ndarray, launch_start: np.ndarray, bounded: bool
) -> bool:
    """The host ops among ``rows`` were there while most of the rank's GPU work (``gpu`` rows, launched at
    ``launch_start``) was launched, and the recorder did not end its op naming early (``bounded``: by time,
    ops or repeat, collector.recording.opnames): a loop found in a naming window is not the run's. A rank
    without GPU work takes its ops as they are."""
    op = rows[_kind(df.iloc[rows], IntervalKind.CPU_OP)]
    if not len(op) or bounded:
        return False
    if not len(gpu):
        return True
    t0, t1 = int(df["start_ns"].to_numpy()[op].min()), int(df["end_ns"].to_numpy()[op].max())
    at = launch_start[gpu]
    return float(((at >= t0) & (at <= t1)).mean()) >= OPS_SPAN_SHARE


def _optimizer_steps(opt: pd.DataFrame, spans: dict[int, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Steps ending where each optimizer step ends; step 0 starts one median step before its end."""
    starts, ends = [], []
    ranks = opt["rank"].to_numpy(np.int64)
    for rank in np.unique(ranks):
        e = np.sort(opt["end_ns"].to_numpy(np.int64)[ranks == rank])
        if len(e) < MIN_ITERATIONS:
            continue
        first = max(spans[int(rank)][0], int(e[0] - np.median(np.diff(e))))
        starts.append(np.stack([np.full(len(e), rank), np.concatenate(([first], e[:-1]))], axis=1))
        ends.append(np.array([[rank, e[-1]]]))
    if not starts:
        return np.empty((0, 2), np.int64), np.empty((0, 2), np.int64)
    return np.concatenate(starts), np.concatenate(ends)


def _step_at(trace: Trace, spec: str) -> tuple[np.ndarray, np.ndarray]:
    """Step starts (rank, start_ns) and last ends (rank, end_ns) for ``--step-at SPEC``."""
    df = trace.intervals
    cpu = _cpu_rows(trace)
    file, _, line = spec.rpartition(":")
    hit = np.zeros(len(df), dtype=bool)
    ranges = False
    if file and line.isdigit():
        key = _strings(df["source"]).str.split(" (", n=1, regex=False).str[0]
        match = ((key == spec) | key.str.endswith("/" + spec)).to_numpy()
        launch = launch_rows(df)
        hit = match & cpu
        hit[launch[match & (launch >= 0)]] = True  # GPU work's source marks the host call that launched it
    if not hit.any():
        hit = _kind(df, IntervalKind.ANNOTATION) & (_strings(df["name"]).to_numpy() == spec) & cpu
        ranges = True
    starts, ends = [], []
    host = cpu & ~_kind(df, IntervalKind.ANNOTATION) | hit
    for rank in np.unique(df["rank"].to_numpy()[hit]):
        rows = np.flatnonzero(host & (df["rank"].to_numpy() == rank))
        rows = rows[np.lexsort((rows, df["start_ns"].to_numpy()[rows]))]
        flag = hit[rows]
        first = rows[flag & ~np.concatenate(([False], flag[:-1]))] if not ranges else rows[flag]
        t0 = df["start_ns"].to_numpy()[first]
        if ranges:
            end = int(df["end_ns"].to_numpy()[first[-1]])
        else:
            period = int(np.median(np.diff(t0))) if len(t0) > 1 else 0
            rank_end = int(df["end_ns"].to_numpy()[df["rank"].to_numpy() == rank].max())
            end = min(int(t0[-1]) + period, rank_end) if period else rank_end
        starts.append(np.stack([np.full(len(t0), rank), t0], axis=1))
        ends.append(np.array([[rank, end]]))
    if not starts:
        return np.empty((0, 2), np.int64), np.empty((0, 2), np.int64)
    return np.concatenate(starts), np.concatenate(ends)


def _trim_first_step(trace: Trace) -> Trace:
    """Trim a marked step 0 that holds the set-up (module docstring); other markers stay as they are. Steps of
    graph replays start after the set-up (warm-up, capture): a first replay slower than the rest (its launch
    uploads the graph) is that replay's own, and stays whole."""
    if trace.meta.step_method == "repeat:graph":
        return trace
    steps = trace.steps()
    dur = (steps["end_ns"] - steps["start_ns"]).to_numpy()
    first = steps.groupby("rank").head(1).index.to_numpy()
    rest = steps[~steps.index.isin(first)].groupby("rank").head(FOLLOWING_STEPS)
    if len(rest) < 2:
        return trace
    median = rest.assign(d=dur[rest.index]).groupby("rank")["d"].median()
    long = [i for i in first if dur[i] > LONG_FIRST_STEP * median.get(steps.at[i, "rank"], np.inf)]
    if not long:
        return trace
    starts = steps[["rank", "start_ns"]].to_numpy(np.int64).copy()
    starts[long, 1] = steps.loc[long, "end_ns"].to_numpy() - median[steps.loc[long, "rank"]].to_numpy().astype(np.int64)
    ends = steps.groupby("rank").tail(1)[["rank", "end_ns"]].to_numpy(np.int64)
    trimmed = _with_steps(trace, starts, ends, trace.meta.step_method)
    return trimmed


# ------------------------------------------------------------------------------------ placing steps


def _with_steps(trace: Trace, starts: np.ndarray, ends: np.ndarray, method: str) -> Trace:
    """``trace`` with one step per start: step k of a rank is [start_k, start_k+1), its last step ends at the
    rank's end in ``ends``. Host intervals get the step holding their start; GPU work its launch's step."""
    df = trace.intervals
    marks = pd.DataFrame(starts, columns=["rank", "start_ns"]).sort_values(["rank", "start_ns"], kind="stable")
    marks = marks.drop_duplicates().reset_index(drop=True)
    marks["step"] = marks.groupby("rank").cumcount()
    last_end = dict(zip(ends[:, 0].tolist(), ends[:, 1].tolist(), strict=True))
    nxt = marks.groupby("rank")["start_ns"].shift(-1)
    marks["end_ns"] = nxt.fillna(marks["rank"].map(last_end)).astype(np.int64)
    marks["end_ns"] = np.maximum(marks["end_ns"], marks["start_ns"])
    step = _placed(trace, marks)
    others = trace.markers[trace.markers["kind"] != MarkerKind.STEP.value]
    new = marks.assign(kind=MarkerKind.STEP.value, name="step " + marks["step"].astype(str))
    markers = conform_markers(pd.concat([others, new], ignore_index=True)) if len(others) else conform_markers(new)
    intervals = df.assign(step=step.astype(np.int32))
    return replace(trace, intervals=intervals, markers=markers).with_meta(step_method=method)


def _placed(trace: Trace, marks: pd.DataFrame) -> np.ndarray:
    """Step of each interval under ``marks`` (rank, step, start_ns, end_ns; sorted by rank and start, not
    overlapping): a host interval's is the step holding its start, GPU work's its launch's (NO_STEP
    outside every step)."""
    df = trace.intervals
    rank = df["rank"].to_numpy(np.int64)
    t = df["start_ns"].to_numpy(np.int64)
    base = int(min(t.min(), marks["start_ns"].min()))
    span = int(max(df["end_ns"].max(), marks["end_ns"].max())) - base + 1
    ms = marks["rank"].to_numpy(np.int64) * span + marks["start_ns"].to_numpy(np.int64) - base
    me = marks["rank"].to_numpy(np.int64) * span + marks["end_ns"].to_numpy(np.int64) - base
    key = rank * span + t - base
    i = np.searchsorted(ms, key, side="right") - 1
    inside = (i >= 0) & (key < me[np.maximum(i, 0)])
    step = np.where(inside, marks["step"].to_numpy()[np.maximum(i, 0)], NO_STEP)
    launch = launch_rows(df)
    gpu = ~_cpu_rows(trace)
    linked = gpu & (launch >= 0)
    step[linked] = step[launch[linked]]
    return step


def _tagged(trace: Trace) -> Trace:
    """A trace whose step markers came without its GPU work tagged with them (a converted or hand-made trace):
    its intervals placed under those markers (:func:`_placed`), so that its steps follow the GPU's pace as a
    recorded trace's do. Traces with tagged GPU work, or with no GPU work linked to a launch, are returned
    as they are."""
    df = trace.intervals
    gpu = ~_cpu_rows(trace)
    if df.empty or (df["step"].to_numpy()[gpu] != NO_STEP).any() or not (gpu & (launch_rows(df) >= 0)).any():
        return trace
    marks = trace.steps().sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    return replace(trace, intervals=df.assign(step=_placed(trace, marks).astype(np.int32)))


# ------------------------------------------------------------------------------------ column helpers


def _strings(col: pd.Series) -> pd.Series:
    return col.astype(str)


def _kind(df: pd.DataFrame, kind: IntervalKind) -> np.ndarray:
    return np.asarray(df["kind"] == kind.value, dtype=bool)


def _matches(col: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """Rows whose value matches ``pattern`` (tested once per category)."""
    col = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype(str).astype("category")
    hit = np.array([bool(pattern.match(str(c))) for c in col.cat.categories] + [False])
    return hit[np.asarray(col.cat.codes)]


def _codes(col: pd.Series, rows: np.ndarray) -> np.ndarray:
    if isinstance(col.dtype, pd.CategoricalDtype):
        return np.asarray(col.cat.codes)[rows].astype(np.int64)
    return pd.factorize(col.iloc[rows])[0].astype(np.int64)


def _cpu_rows(trace: Trace) -> np.ndarray:
    cpu_lane = np.array([ln.kind is LaneKind.CPU_THREAD for ln in trace.lanes] + [False])
    lane = trace.intervals["lane"].to_numpy(np.int64)
    return cpu_lane[np.where((lane >= 0) & (lane < len(trace.lanes)), lane, len(trace.lanes))]


def _launch_start(df: pd.DataFrame) -> np.ndarray:
    """Start of each row's launching interval, or its own start."""
    row = launch_rows(df)
    t = df["start_ns"].to_numpy(np.int64)
    return np.where(row >= 0, t[np.maximum(row, 0)], t)


def _rank_spans(df: pd.DataFrame) -> dict[int, tuple[int, int]]:
    g = df.groupby("rank")
    lo, hi = g["start_ns"].min(), g["end_ns"].max()
    return {int(r): (int(lo[r]), int(hi[r])) for r in lo.index}
