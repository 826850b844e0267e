"""Page and API: two runs compared, one above the other on one step-aligned time scale.

The comparison is built from the two runs' stored analyses (webapp.analysis.compare's metrics_table and
ops_table), so it needs neither trace in memory; the timelines load their slices like the run page.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from flask import Blueprint, Response, abort, jsonify, render_template, request, url_for

from webapp.analysis.compare import metrics_table, ops_table
from webapp.analysis.records import frame_records
from webapp.figures import compare_rows, compare_steps_figure
from webapp.static_assets import plotly_etag
from webapp.store import RunInfo, RunNotFound, get_store

bp = Blueprint("compare", __name__)

HEADLINE = (
    "step_time_median_ns",
    "step_time_p90_ns",
    "gpu_busy_frac",
    "copy_compute_overlap_frac",
    "exposed_copy_step_median_ns",
    "sync_wait_step_median_ns",
    "gpu_idle_step_median_ns",
    "idle_sync_stall_step_median_ns",
    "idle_launch_bound_step_median_ns",
    "pageable_copy_bytes",
    "sync_wait_count",
)


def comparison(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Comparison.to_dict()-shaped result from two stored analyses (RunAnalysis.to_dict())."""
    metrics = metrics_table(a.get("metrics") or {}, b.get("metrics") or {})
    ka, kb = pd.DataFrame(a.get("kernels") or []), pd.DataFrame(b.get("kernels") or [])
    cols = ["kind", "name", "count", "total_ns", "mean_ns"]
    steps_a = int((a.get("summary") or {}).get("steps") or 1)
    steps_b = int((b.get("summary") or {}).get("steps") or 1)
    has_cols = set(cols) <= set(ka.columns) and set(cols) <= set(kb.columns)
    ops = ops_table(ka, kb, steps_a, steps_b) if has_cols else pd.DataFrame()
    ra = [f["rule"] for f in a.get("findings") or []]
    rb = [f["rule"] for f in b.get("findings") or []]
    return {
        "metrics": frame_records(metrics),
        "ops": frame_records(ops),
        "findings": {
            "fixed": [r for r in ra if r not in rb],
            "new": [r for r in rb if r not in ra],
            "unchanged": [r for r in ra if r in rb],
        },
        "a": _side(a),
        "b": _side(b),
    }


def _side(analysis: dict[str, Any]) -> dict[str, Any]:
    """One run's part of a comparison: its summary, what-if and findings."""
    return {
        "summary": analysis.get("summary") or {},
        "what_if": analysis.get("what_if") or {},
        "findings": analysis.get("findings") or [],
    }


def _pair() -> tuple[RunInfo, RunInfo]:
    a, b = request.args.get("a", ""), request.args.get("b", "")
    if not a or not b:
        abort(400, "give two run ids: ?a=<id>&b=<id>")
    store = get_store()
    try:
        return store.get(a), store.get(b)
    except RunNotFound as exc:
        abort(404, f"no run with id {exc.args[0]!r}")


@bp.get("/api/compare")
def api() -> Response:
    info_a, info_b = _pair()
    store = get_store()
    return jsonify(
        {
            "a": info_a.to_dict(),
            "b": info_b.to_dict(),
            **comparison(store.analysis(info_a.id), store.analysis(info_b.id)),
        }
    )


def _steps(analysis: dict[str, Any]) -> list[dict[str, int]]:
    return [
        {"step": int(r["step"]), "start_ns": int(r["start_ns"]), "end_ns": int(r["end_ns"])}
        for r in analysis.get("per_step") or []
        if int(r.get("rank", 0)) == 0
    ]


@bp.get("/compare")
def page() -> str:
    store = get_store()
    if not request.args.get("a") or not request.args.get("b"):
        return render_template("compare_pick.html", runs=[r.to_dict() for r in store.list_runs()])
    info_a, info_b = _pair()
    an_a, an_b = store.analysis(info_a.id), store.analysis(info_b.id)
    result = comparison(an_a, an_b)
    store.warm(info_a.id)
    store.warm(info_b.id)
    rows = {r["metric"]: r for r in compare_rows(result["metrics"])}
    page_data = {
        "a": {
            "run": info_a.to_dict(),
            "lanes": store.lanes(info_a.id),
            "steps": _steps(an_a),
            "api": url_for("api.get_run", run_id=info_a.id),
        },
        "b": {
            "run": info_b.to_dict(),
            "lanes": store.lanes(info_b.id),
            "steps": _steps(an_b),
            "api": url_for("api.get_run", run_id=info_b.id),
        },
        "ops": result["ops"][:300],
        "plotly": url_for("assets.plotly_js", tag=plotly_etag()),
        "step_figure": compare_steps_figure(
            an_a.get("per_step") or [], an_b.get("per_step") or [], f"A: {info_a.name}", f"B: {info_b.name}"
        ),
    }
    return render_template(
        "compare.html",
        a=info_a.to_dict(),
        b=info_b.to_dict(),
        page=page_data,
        headline=[rows[k] for k in HEADLINE if k in rows],
        findings=result["findings"],
        all_rows=[r for k, r in rows.items() if k not in HEADLINE],
    )
