"""CUDA graph replays in a trace: each replay's GPU work under a labelled span, and replays as step tokens.

A graph replay is one host call (``cudaGraphLaunch``, ``cuGraphLaunch``, ``hipGraphLaunch``) and every kernel,
copy and memset of the graph, which CUPTI (and so torch.profiler) records with that call's correlation id:
the importer links them to the call as their launch. :func:`mark_graph_replays` adds, per replay and GPU
lane, an ``annotation`` interval named ``CUDA graph N replay`` spanning the replay's work on that lane (``N``
numbers the distinct graphs in the order they first ran; a graph is known by its work's count and first and
last names). :func:`replay_tokens` gives step finding (collector.steps) one token per replay.

Vectorized over the interval frame; loops run over the categories of the name column only.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from collector.importers.frames import concat_keeping_codes, launch_rows
from collector.model import GPU_KINDS, IntervalKind, Trace, conform_intervals

GRAPH_LAUNCH = re.compile(r"^(cuda|cu|hip)GraphLaunch(_v\d+)?$")
"""Host calls that replay a CUDA graph."""
GRAPH_MADE = re.compile(r"^(cuda|cu|hip)(StreamEndCapture|GraphInstantiate\w*)(_v\d+)?$")
"""Host calls that end a graph's capture or make it runnable: what comes before the last of them (ahead of
the first replay) is the set-up."""
REPLAY_LABEL = "CUDA graph {} replay"
"""The name of a replay's span; ``{}`` is the graph's number."""


def _is_graph_launch(frame: pd.DataFrame) -> np.ndarray:
    names = frame["name"] if isinstance(frame["name"].dtype, pd.CategoricalDtype) else frame["name"].astype("category")
    hit = np.array([bool(GRAPH_LAUNCH.match(str(c))) for c in names.cat.categories] + [False], dtype=bool)
    return hit[names.cat.codes.to_numpy()]


def graph_work(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The GPU rows launched by graph replays and, per such row, the row of its replay's launch call."""
    if frame.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    launcher = _is_graph_launch(frame)
    if not launcher.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    gpu = np.isin(frame["kind"].astype(str).to_numpy(), [k.value for k in GPU_KINDS])
    launch = launch_rows(frame)
    rows = np.flatnonzero(gpu & (launch >= 0))
    rows = rows[launcher[launch[rows]]]
    return rows, launch[rows]


def graph_numbers(frame: pd.DataFrame, rows: np.ndarray, replay: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per replay (its launch row, ascending): the graph it replays, numbered in the order graphs first ran.
    ``rows``/``replay`` as :func:`graph_work` gives them. Returns (launch rows, graph numbers)."""
    launches, at = np.unique(replay, return_inverse=True)
    if not len(launches):
        return launches, np.zeros(0, np.int64)
    start = frame["start_ns"].to_numpy(np.int64)[rows]
    names = pd.factorize(frame["name"].astype(str).to_numpy()[rows])[0]
    order = np.lexsort((start, at))  # each replay's work in time order
    first = np.ones(len(order), dtype=bool)
    first[1:] = at[order][1:] != at[order][:-1]
    last = np.append(first[1:], True)
    count = np.bincount(at, minlength=len(launches))
    key = pd.MultiIndex.from_arrays([count, names[order][first], names[order][last]])
    by_start = np.argsort(frame["start_ns"].to_numpy(np.int64)[launches], kind="stable")
    codes = np.empty(len(launches), np.int64)
    codes[by_start] = pd.factorize(key[by_start])[0]  # numbered by first run
    return launches, codes


def mark_graph_replays(trace: Trace) -> Trace:
    """``trace`` with a ``CUDA graph N replay`` annotation over each replay's work on each GPU lane (module doc);
    unchanged when it holds no graph replay. New rows get ids after the last one (order as the caller keeps it)."""
    iv = trace.intervals
    rows, replay = graph_work(iv)
    if not len(rows):
        return trace
    launches, graph = graph_numbers(iv, rows, replay)
    number = pd.Series(graph, index=launches)
    spans = pd.DataFrame(
        {
            "launch": replay,
            "lane": iv["lane"].to_numpy(np.int64)[rows],
            "start_ns": iv["start_ns"].to_numpy(np.int64)[rows],
            "end_ns": iv["end_ns"].to_numpy(np.int64)[rows],
        }
    )
    spans = spans.groupby(["launch", "lane"], sort=True).agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
    spans = spans.reset_index()
    lane = spans["lane"].to_numpy(np.int64)
    launch = spans["launch"].to_numpy(np.int64)
    first_id = int(iv["id"].max()) + 1
    add = pd.DataFrame(
        {
            "id": np.arange(first_id, first_id + len(spans), dtype=np.int64),
            "rank": iv["rank"].to_numpy()[launch],
            "lane": lane,
            "lane_kind": [trace.lanes[i].kind.value for i in lane],
            "stream": [trace.lanes[i].ident for i in lane],
            "lane_label": [trace.lanes[i].label for i in lane],
            "kind": IntervalKind.ANNOTATION.value,
            "name": [REPLAY_LABEL.format(g) for g in number.reindex(launch).to_numpy()],
            "start_ns": spans["start_ns"].to_numpy(np.int64),
            "end_ns": spans["end_ns"].to_numpy(np.int64),
            "step": iv["step"].to_numpy()[launch],
            "launch_id": iv["id"].to_numpy(np.int64)[launch],  # the replay's call: the span takes its step
        }
    )
    frame = concat_keeping_codes(iv, conform_intervals(add)[iv.columns])
    return replace(trace, intervals=conform_intervals(frame))


def replay_tokens(
    frame: pd.DataFrame, rows: np.ndarray, minimum: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Step-finding tokens for the GPU rows ``rows`` of one rank: each graph replay is one token (its graph,
    from its launch call's start to the end of its last work) and every other GPU row launched after the
    graph was made (:func:`_setup_end`) one token (its name, from its launch's start, or its own, to its end;
    the warm-up and the capture before are set-up). Returns (codes, start_ns, end_ns) in no particular
    order, or None when fewer than ``minimum`` replays launched work among ``rows``."""
    work, replay = graph_work(frame)
    mine = np.isin(work, rows)
    work, replay = work[mine], replay[mine]
    launches, graph = graph_numbers(frame, work, replay)
    if len(launches) < minimum:
        return None
    start, end = frame["start_ns"].to_numpy(np.int64), frame["end_ns"].to_numpy(np.int64)
    others = rows[~np.isin(rows, work)]
    launch = launch_rows(frame)[others]
    other_t = np.where(launch >= 0, start[np.maximum(launch, 0)], start[others])
    rank = frame["rank"].to_numpy()[rows[0]] if len(rows) else 0
    after = other_t >= _setup_end(frame, rank, int(start[launches].min()))
    others, other_t = others[after], other_t[after]
    other_codes = pd.factorize(frame["name"].astype(str).to_numpy()[others])[0].astype(np.int64)
    replay_end = pd.Series(end[work]).groupby(replay).max().reindex(launches).to_numpy(np.int64)
    codes = np.concatenate([other_codes, int(other_codes.max(initial=-1)) + 1 + graph])
    return codes, np.concatenate([other_t, start[launches]]), np.concatenate([end[others], replay_end])


def _setup_end(frame: pd.DataFrame, rank: int, first_replay: int) -> int:
    """Where a rank's graph loop starts: the end of its last capture (or instantiation) call before its first
    replay, else that replay's launch. Warm-up and capture come before it."""
    names = frame["name"] if isinstance(frame["name"].dtype, pd.CategoricalDtype) else frame["name"].astype("category")
    made = np.array([bool(GRAPH_MADE.match(str(c))) for c in names.cat.categories] + [False], dtype=bool)
    rows = np.flatnonzero(made[names.cat.codes.to_numpy()] & (frame["rank"].to_numpy() == rank))
    start = frame["start_ns"].to_numpy(np.int64)[rows]
    before = rows[start < first_replay]
    return int(frame["end_ns"].to_numpy(np.int64)[before].max()) if len(before) else first_replay


def has_graph_replays(frame: pd.DataFrame, minimum: int) -> bool:
    """At least ``minimum`` graph replays launched GPU work in ``frame``."""
    _, replay = graph_work(frame)
    return len(np.unique(replay)) >= minimum


def replays_past_marks(trace: Trace, minimum: int) -> bool:
    """More CUDA graph replays after the marked steps than there are marked steps, and at least ``minimum``:
    a loop of replays after a marked warm-up (an optimizer step in each eager iteration before the capture).
    Replays past the marks are those outside every step, and those of a rank's last step beyond its usual
    count (a recorder closes the last step when it stops, so a loop of replays after the marks lands there;
    a trace whose every step holds its replays, torch.profiler's ProfilerStep, keeps its steps)."""
    df = trace.intervals
    _, replay = graph_work(df)
    if not len(replay):
        return False
    steps = trace.steps()
    launches = np.unique(replay)
    step, rank = df["step"].to_numpy()[launches], df["rank"].to_numpy()[launches]
    loose = int((step < 0).sum())
    for r, marked in steps.groupby("rank")["step"]:
        numbers = np.sort(marked.to_numpy())
        mine = step[(rank == r) & (step >= 0)]
        at = np.minimum(np.searchsorted(numbers, mine), len(numbers) - 1)
        counts = np.bincount(at[numbers[at] == mine], minlength=len(numbers))
        usual = float(np.median(counts[:-1])) if len(counts) > 1 else 0.0
        loose += max(int(counts[-1] - usual), 0) if len(counts) else 0
    return loose >= max(minimum, len(steps) + 1)
