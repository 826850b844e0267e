"""Pages: the runs list (``/``) and one run's page with the timeline (``/runs/<id>``)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, abort, render_template, url_for

from webapp.analysis import catalog
from webapp.analysis.report import what_if_rows
from webapp.figures import metric_cards
from webapp.pipeline import current_analysis
from webapp.static_assets import plotly_etag
from webapp.store import RunInfo, RunNotFound, get_store

bp = Blueprint("runs", __name__)

MAX_EMBEDDED_STEPS = 20_000
"""Step windows embedded in the run page (for "go to step"); the tables fetch the full analysis later."""


def compare_candidates(run: RunInfo, runs: list[RunInfo]) -> list[RunInfo]:
    """The runs other than ``run`` that its page offers to compare with, the likeliest first: the same
    workload (the script or demo run again, before and after a change), then runs of the same source, rank
    count and device; ``runs``' order (newest first) within each."""
    kind = (run.source, run.ranks, run.device)

    def unlike(r: RunInfo) -> tuple[bool, bool]:
        return (not run.workload or r.workload != run.workload, (r.source, r.ranks, r.device) != kind)

    return sorted((r for r in runs if r.id != run.id), key=unlike)


def run_row(info: RunInfo) -> dict[str, Any]:
    """A run as the runs list shows it (plain values; the template formats them)."""
    s = info.summary
    gpu = s.get("gpu_work", True)  # a run without GPU work has no GPU figures to show
    return {
        "id": info.id,
        "name": info.name,
        "source": info.source,
        "device": info.device or "—",
        "created": info.created or "",
        "steps": s.get("steps"),
        "step_time_median_ns": s.get("step_time_median_ns"),
        "gpu_busy_frac": s.get("gpu_busy_frac") if gpu else None,
        "copy_compute_overlap_frac": s.get("copy_compute_overlap_frac") if gpu else None,
        "findings": s.get("findings"),
        "intervals": info.intervals,
        "ranks": info.ranks,
    }


@bp.get("/")
def index() -> str:
    rows = [run_row(r) for r in get_store().list_runs()]
    return render_template("runs.html", runs=rows)


@bp.get("/runs/<run_id>")
def run_page(run_id: str) -> str:
    store = get_store()
    try:
        info = store.get(run_id)
        analysis = current_analysis(store, run_id)
        lanes = store.lanes(run_id)
    except RunNotFound:
        abort(404, f"no run with id {run_id!r}")
    store.warm(run_id)  # zooming needs the run's arrays: start loading them now
    light: dict[str, Any] = {"findings": analysis.get("findings") or []}
    light["steps"] = [
        {"rank": r.get("rank", 0), "step": r["step"], "start_ns": r["start_ns"], "end_ns": r["end_ns"]}
        for r in analysis.get("per_step") or []
        if "start_ns" in r and "step" in r
    ][:MAX_EMBEDDED_STEPS]
    light["phases"] = [
        {"rank": p.get("rank", 0), "phase": p["phase"], "start_ns": p["start_ns"], "end_ns": p["end_ns"]}
        for p in analysis.get("phases") or []
        if "phase" in p and "start_ns" in p
    ]
    metrics = analysis.get("metrics") or {}
    gpu = catalog.gpu_work(metrics)
    page = {
        "run": info.to_dict(),
        "lanes": lanes,
        "analysis": light,
        "gpu_work": gpu,
        "analysis_url": url_for("api.run_analysis", run_id=run_id),
        "api": url_for("api.get_run", run_id=run_id),
        "plotly": url_for("assets.plotly_js", tag=plotly_etag()),
        "metrics_catalog": catalog.to_json(gpu),
    }
    others = compare_candidates(info, store.list_runs())
    what_if = analysis.get("what_if") or {}
    return render_template(
        "run.html",
        run=info.to_dict(),
        page=page,
        notes=analysis.get("notes") or [],
        cards=metric_cards(metrics, analysis.get("per_rank") or []),
        collectives=bool((analysis.get("ranks") or {}).get("collectives")),
        findings=light["findings"],
        minor_findings=analysis.get("minor_findings") or [],
        what_if=what_if,
        what_if_rows=what_if_rows(what_if, light["findings"]),
        others=others,
    )
