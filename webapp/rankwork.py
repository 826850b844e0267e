"""Per-rank work in parallel, joined by small per-rank summaries: how a job of many ranks is analysed.

A 1024-rank job's traces do not fit one process, so each rank's file is loaded, analysed and indexed on
its own (:func:`summarize_rank`), in a process pool by default or as Ray tasks on a cluster the user
already has (``ray="auto"``, an address, or ``"local"`` for a fresh local instance). Only a
:class:`RankSummary` comes back: the rank's collectives (a few rows per step) and a few numbers.
:func:`join_summaries` lines the ranks' clocks up on their collective ends (collector.ranks.align) and finds
who arrives last and what the others wait, as webapp.analysis.ranks does on a merged run.

With Ray, every node must reach the files at the same paths (shared storage) and have streamscope
installed; a local instance is given this checkout's path.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from collector.errors import StreamscopeError
from collector.model import IntervalKind, MarkerKind, Trace, step_at

T = TypeVar("T")

COLLECTIVE_COLUMNS = ("rank", "kind", "name", "group", "start_ns", "end_ns", "step")
"""Columns of RankSummary.collectives: the rank's collective intervals on its own clock (ns), with the step
each is in (-1: none)."""


class RankWorkError(StreamscopeError):
    """A rank file that cannot be summarised, or Ray asked for and missing (one line; exit 2, HTTP 400)."""


@dataclass(frozen=True)
class RankSummary:
    """What one rank's work sends back: ``collectives`` (COLLECTIVE_COLUMNS), ``intervals`` and ``steps``
    (counts), ``step_time_median_ns``, the rules of its single-rank ``findings``, ``index_bytes`` (its
    level-of-detail index in memory) and ``seconds`` spent per stage (load, analyse, index; wall seconds)."""

    name: str
    rank: int
    host: str
    device: str
    intervals: int
    steps: int
    step_time_median_ns: int
    findings: tuple[str, ...]
    index_bytes: int
    seconds: dict[str, float]
    collectives: pd.DataFrame


def load_rank(path: str) -> Trace:
    """One rank's file (ours or torch.profiler's), its host-side collectives marked as collectives. A file
    that cannot be read is a RankWorkError of one line that starts with the file's name."""
    from collector.importers.collectives import mark_host_collectives
    from collector.load import load_trace

    try:
        return mark_host_collectives(load_trace(path))
    except (OSError, ValueError, EOFError) as exc:
        text = (str(exc).splitlines() or [type(exc).__name__])[0].replace(f"{path}: ", "")
        raise RankWorkError(f"{Path(path).name}: {text}") from None


def summarize_rank(path: str) -> RankSummary:
    """Load, analyse and index one rank's file (the web app's pipeline) and keep only its summary."""
    from webapp.pipeline import prepare

    t0 = time.perf_counter()
    trace = load_rank(path)
    t1 = time.perf_counter()
    if len(trace.ranks) != 1:
        raise RankWorkError(f"{Path(path).name}: holds ranks {trace.ranks}; give one rank per file")
    run = prepare(trace)
    t2 = time.perf_counter()
    kind = trace.intervals["kind"].astype(str).to_numpy()
    own = [c for c in COLLECTIVE_COLUMNS if c != "step"]
    coll = trace.intervals.loc[kind == IntervalKind.COLLECTIVE.value, own]
    coll = coll.astype({"kind": str, "name": str, "group": str}).reset_index(drop=True)
    # the analysis' steps (markers, annotations or the loop it found); the file's step column has markers only
    windows = pd.DataFrame(run.analysis.get("per_step") or [], columns=["start_ns", "end_ns", "step"])
    coll["step"] = step_at(windows.assign(kind=MarkerKind.STEP.value), coll["start_ns"].to_numpy(np.int64))
    metrics = run.analysis.get("metrics") or {}
    index_bytes = sum(int(getattr(v, "nbytes", 0)) for v in vars(run.index).values())
    return RankSummary(
        name=Path(path).name,
        rank=int(trace.ranks[0]),
        host=trace.meta.host,
        device=trace.meta.device_name,
        intervals=len(trace.intervals),
        steps=int(metrics.get("steps") or 0),
        step_time_median_ns=int(metrics.get("step_time_median_ns") or 0),
        findings=tuple(str(f.get("rule")) for f in run.analysis.get("findings") or []),
        index_bytes=index_bytes,
        seconds={"load": t1 - t0, "analyse_index": t2 - t1},
        collectives=coll,
    )


def run_per_rank(
    func: Callable[[str], T],
    paths: Sequence[str],
    *,
    workers: int | None = None,
    ray: str | None = None,
    start_method: str | None = None,
) -> list[T]:
    """``func(path)`` for every path, in order: serially for ``workers=1`` (or one path, or one CPU), in a
    process pool of ``workers`` (default: the CPU count) or as Ray tasks when ``ray`` is given ("auto", an
    address, or "local"). The first error (in path order) is raised; paths not yet started are dropped.

    ``start_method`` starts the pool's processes another way than the platform's default (multiprocessing):
    a threaded server asks for "forkserver", whose processes start from a clean one with ``func``'s module
    already imported, never from a copy of its own threads."""
    if ray:
        return _on_ray(func, list(paths), ray)
    n = min(len(paths), workers or os.cpu_count() or 1)
    if n <= 1:
        return [func(p) for p in paths]
    context = multiprocessing.get_context(start_method) if start_method else None
    if start_method == "forkserver":
        multiprocessing.set_forkserver_preload([func.__module__])
    with ProcessPoolExecutor(max_workers=n, mp_context=context) as pool:
        futures = [pool.submit(func, p) for p in paths]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise


def _on_ray(func: Callable[[str], T], paths: list[str], address: str) -> list[T]:
    try:
        import ray
    except ImportError:
        raise RankWorkError("--ray needs Ray: pip install -e '.[ray]' in the Streamscope checkout") from None
    root = str(Path(__file__).resolve().parents[1])
    started = not ray.is_initialized()
    if started:
        try:
            if address == "local":
                env = {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH", "")]))}
                ray.init(
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                    runtime_env={"env_vars": env},
                )
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RankWorkError(f"cannot reach Ray at {address!r}: {str(exc).splitlines()[0]}") from None
    try:
        task = ray.remote(func)
        try:
            return list(ray.get([task.remote(p) for p in paths]))
        except Exception as exc:  # a task's own error arrives wrapped in a RayTaskError
            cause = getattr(exc, "cause", None)
            if isinstance(cause, StreamscopeError):
                raise cause from None
            raise
    finally:
        if started:
            ray.shutdown()


def join_summaries(summaries: Sequence[RankSummary]) -> dict[str, Any]:
    """The cross-rank analysis from per-rank summaries: ``collective_count``, ``straggler`` (the rank last in
    most collectives, or None) with ``last_frac``, and ``ranks``: one record per rank with ``rank``, ``host``,
    ``intervals``, ``step_time_median_ns``, ``offset_ns``/``residual_ns`` (clock alignment), ``last_count``
    (collectives it arrived last in), ``wait_ns`` (its total wait inside collectives, ns) and
    ``wait_per_step_ns`` (its wait inside the collectives of its steps over its step count, overlapping waits
    counted once, as the merged run's per-rank breakdown has it: webapp.analysis.ranks; None for a rank
    without steps)."""
    from collector.ranks.align import clock_offsets, matched_collectives

    if len(summaries) < 2:
        raise RankWorkError("a cross-rank analysis needs the files of at least two ranks")
    ranks = [s.rank for s in summaries]
    if len(set(ranks)) != len(ranks):
        raise RankWorkError(f"rank {pd.Series(ranks)[pd.Series(ranks).duplicated()].iloc[0]} is given twice")
    whole = pd.concat([s.collectives for s in summaries], ignore_index=True)
    m = matched_collectives(whole)
    offsets = clock_offsets(m, sorted(ranks), {s.rank: s.host for s in summaries}).set_index("rank")
    m["start_ns"] = m["start_ns"].to_numpy(np.int64) + offsets["offset_ns"].reindex(m["rank"]).to_numpy(np.int64)
    latest = m.groupby("seq")["start_ns"].transform("max").to_numpy(np.int64)
    m["wait_ns"] = latest - m["start_ns"].to_numpy(np.int64)
    last = m.loc[m.groupby("seq")["start_ns"].idxmax().to_numpy(), "rank"].value_counts() if len(m) else None
    n = int(m["seq"].nunique()) if len(m) else 0
    wait = m.groupby("rank")["wait_ns"].sum()
    m["step"] = whole["step"].to_numpy(np.int64)[m["row"].to_numpy(np.int64)]
    per_step = _step_waits(m)
    rows = [
        {
            "rank": s.rank,
            "host": s.host,
            "intervals": s.intervals,
            "step_time_median_ns": s.step_time_median_ns,
            "offset_ns": int(offsets.at[s.rank, "offset_ns"]),
            "residual_ns": int(offsets.at[s.rank, "residual_ns"]),
            "last_count": int(last.get(s.rank, 0)) if last is not None else 0,
            "wait_ns": int(wait.get(s.rank, 0)),
            "wait_per_step_ns": _per_step(per_step.get(s.rank), s.steps),
        }
        for s in sorted(summaries, key=lambda s: s.rank)
    ]
    straggler = None
    if last is not None and len(last):
        top = int(last.idxmax())
        straggler = {"rank": top, "last_frac": float(last.max() / n)}
    return {"collective_count": n, "straggler": straggler, "ranks": rows}


def _step_waits(m: pd.DataFrame) -> dict[int, np.ndarray]:
    """Per rank, its wait inside the collectives of each step it waited in (ns): the union of the intervals
    [start, start + wait] of the matched collectives ``m`` with that step, so waits that overlap count once."""
    w = m.loc[m["step"].to_numpy() >= 0, ["rank", "step", "start_ns", "wait_ns"]]
    if w.empty:
        return {}
    w = w.sort_values(["rank", "step", "start_ns"], kind="stable")
    start = w["start_ns"].to_numpy(np.int64)
    end = start + np.maximum(w["wait_ns"].to_numpy(np.int64), 0)
    keys = [w["rank"].to_numpy(), w["step"].to_numpy()]
    reach = pd.Series(end).groupby(keys).cummax().groupby(keys).shift(1).to_numpy(np.float64)  # NaN: first
    covered = end - np.fmax(start, reach)
    steps = pd.Series(np.maximum(covered, 0)).groupby(keys).sum()
    return {int(r): g.to_numpy(np.float64) for r, g in steps.groupby(level=0)}


def _per_step(waits: np.ndarray | None, steps: int) -> int | None:
    """The mean over ``steps`` steps of ``waits`` (one per step that waited; the other steps wait 0), ns."""
    found = np.zeros(0) if waits is None else waits
    n = max(steps, len(found))
    return round(float(found.sum()) / n) if n else None
