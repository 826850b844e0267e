"""The computing half of ingest: a loaded Trace -> (sorted trace, analysis, index, overview) for Store.add.

The store only stores; everything derived from a trace is computed here, once, before anything is written.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from collector.model import Trace
from webapp.analysis.catalog import gpu_work
from webapp.analysis.lod import RunIndex
from webapp.analysis.version import analysis_version

if TYPE_CHECKING:
    from webapp.store import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedRun:
    """What Store.add writes: the trace (intervals sorted by lane then start_ns), its RunAnalysis.to_dict(),
    its level-of-detail index and the whole-run timeline payload (JSON bytes)."""

    trace: Trace
    analysis: dict[str, Any]
    index: RunIndex
    overview: bytes


def prepare(trace: Trace, analysis: dict[str, Any] | None = None) -> PreparedRun:
    """Sort, analyse (unless ``analysis`` is given), index and render the overview of ``trace``; the
    analysis' summary says whether the run has GPU work (``gpu_work``)."""
    analysis = _with_gpu_work(analyze_dict(trace) if analysis is None else analysis)
    frame = trace.intervals.sort_values(["lane", "start_ns"], kind="stable").reset_index(drop=True)
    sorted_trace = Trace(trace.meta, trace.lanes, frame, trace.markers)
    index = RunIndex(sorted_trace)
    return PreparedRun(sorted_trace, analysis, index, overview_json(index))


def _with_gpu_work(analysis: dict[str, Any]) -> dict[str, Any]:
    if analysis.get("summary") and analysis.get("metrics"):  # the runs list shows no GPU figure without GPU work
        return {**analysis, "summary": {**analysis["summary"], "gpu_work": gpu_work(analysis["metrics"])}}
    return analysis


def analyze_dict(trace: Trace) -> dict[str, Any]:
    """RunAnalysis.to_dict() for ``trace`` and the ``analysis_version`` that made it; a run whose analysis
    fails is still stored, as an empty analysis with a note (and an empty summary, so the runs list shows no
    numbers for it)."""
    from webapp.analysis import RunAnalysis, analyze

    version = {"analysis_version": analysis_version()}
    try:
        return dict(analyze(trace).to_dict()) | version
    except Exception as exc:  # analysis bugs must not lose the user's run
        log.exception("analysis failed")
        failed = RunAnalysis.from_dict({"notes": [f"analysis failed: {exc}"]})
        return failed.to_dict() | {"summary": {}} | version


def current_analysis(store: Store, run_id: str) -> dict[str, Any]:
    """The run's stored analysis; computed again from the stored run first (and stored, its catalog summary
    too) when another version of the analysis made it (webapp.analysis.version). One computation per run at a
    time; concurrent readers wait for it."""
    stored = store.analysis(run_id)
    if stored.get("analysis_version") == analysis_version():
        return stored
    with store.exclusive(f"analysis:{run_id}"):
        stored = store.analysis(run_id)
        if stored.get("analysis_version") == analysis_version():
            return stored
        log.info("run %s: analysis made by another version, computing it again", run_id)
        try:
            trace = store.load(run_id)
        except Exception as exc:  # the stored run cannot be read (any reason): what was said of it, said so
            log.warning("run %s: cannot be read to analyse it again", run_id, exc_info=True)
            note = (
                "This analysis was made by an older version of Streamscope; the run could not be read to make it"
                f" again ({exc})."
            )
            return {**stored, "notes": [*(stored.get("notes") or []), note]}
        fresh = _with_gpu_work(analyze_dict(trace))
        store.replace_analysis(run_id, fresh)
        return fresh


def overview_json(index: RunIndex) -> bytes:
    """The whole-run timeline payload (webapp.timeline.view_payload) as JSON bytes."""
    import msgspec

    from webapp.timeline import OVERVIEW_WIDTH_PX, view_payload

    end = max(index.end_ns, index.origin_ns + 1)
    return msgspec.json.encode(view_payload(index, index.origin_ns, end, OVERVIEW_WIDTH_PX))


REFRESH_MAX_INTERVALS = 2_000_000
"""Runs up to this size get their analysis computed again in the background when the server starts (larger
ones on their first read): the runs list then shows this version's summaries."""


def refresh_stale_analyses(store: Store, max_intervals: int = REFRESH_MAX_INTERVALS) -> threading.Thread:
    """Start a daemon thread that brings every stored run of at most ``max_intervals`` to this version's
    analysis (:func:`current_analysis`), smallest first; returns it."""

    def refresh() -> None:
        for info in sorted(store.list_runs(), key=lambda r: r.intervals):
            if info.intervals > max_intervals:
                break
            try:
                current_analysis(store, info.id)
            except Exception:  # a run deleted meanwhile, or one that cannot be read: its page says why
                log.warning("run %s: analysis not refreshed", info.id, exc_info=True)

    thread = threading.Thread(target=refresh, name="refresh-analyses", daemon=True)
    thread.start()
    return thread
