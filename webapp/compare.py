"""Page and API: two runs compared, one above the other on one step-aligned time scale.

The comparison is built from the two runs' stored analyses (webapp.analysis.compare's metrics_table and
ops_table), so it needs neither trace in memory; the timelines load their slices like the run page. The page
opens with the comparison's verdict, the sentence `streamscope compare` and the offline report say.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, abort, jsonify, render_template, request, url_for

from webapp.analysis import catalog
from webapp.analysis.compare import Comparison, compare_analyses, verdict_of
from webapp.analysis.records import RunAnalysis, frame_records
from webapp.figures import compare_metric_rows, compare_steps_figure
from webapp.pipeline import current_analysis
from webapp.static_assets import plotly_etag
from webapp.store import RunInfo, RunNotFound, Store, get_store

bp = Blueprint("compare", __name__)


def comparison(store: Store, info_a: RunInfo, info_b: RunInfo) -> tuple[Comparison, dict[str, Any]]:
    """The two stored runs compared by webapp.analysis.compare (the CLI's comparison), and its to_dict()."""
    result = compare_analyses(stored_analysis(store, info_a.id), stored_analysis(store, info_b.id))
    return result, result.to_dict()


def stored_analysis(store: Store, run_id: str) -> RunAnalysis:
    """The run's stored analysis as a RunAnalysis."""
    return RunAnalysis.from_dict(current_analysis(store, run_id))


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
    """The comparison of ?a= (the baseline) and ?b=; its "a" and "b" are each run's catalog row (id, name,
    ...) with the comparison's summary, what-if and findings of that run."""
    info_a, info_b = _pair()
    result = comparison(get_store(), info_a, info_b)[1]
    return jsonify(
        {
            **result,
            "a": {**info_a.to_dict(), **result["a"]},
            "b": {**info_b.to_dict(), **result["b"]},
        }
    )


def _steps(analysis: RunAnalysis) -> list[dict[str, int]]:
    """Every rank's step windows (rank, step, start_ns, end_ns); the page aligns on one rank's."""
    steps = analysis.per_step
    if not {"step", "start_ns", "end_ns"} <= set(steps.columns):
        return []
    if "rank" not in steps.columns:
        steps = steps.assign(rank=0)
    return [
        {"rank": int(r["rank"]), "step": int(r["step"]), "start_ns": int(r["start_ns"]), "end_ns": int(r["end_ns"])}
        for r in frame_records(steps[["rank", "step", "start_ns", "end_ns"]])
    ]


def _pick_page(store: Store) -> str:
    """The form that picks two runs; by default the newest run (B) compared with the one stored before it
    (A, the baseline)."""
    runs = [r.to_dict() for r in store.list_runs()]  # newest first
    default_a = runs[1]["id"] if len(runs) > 1 else None
    default_b = runs[0]["id"] if runs else None
    return render_template("compare_pick.html", runs=runs, default_a=default_a, default_b=default_b)


@bp.get("/compare")
def page() -> str:
    store = get_store()
    if not request.args.get("a") or not request.args.get("b"):
        return _pick_page(store)
    info_a, info_b = _pair()
    compared, result = comparison(store, info_a, info_b)
    an_a, an_b = compared.analysis_a, compared.analysis_b
    store.warm(info_a.id)
    store.warm(info_b.id)
    gpu = catalog.gpu_work(an_a.metrics) or catalog.gpu_work(an_b.metrics)
    headline, others = compare_metric_rows(result["metrics"], an_a.metrics, an_b.metrics)
    page_data = {
        "a": {
            "run": info_a.to_dict(),
            "lanes": store.lanes(info_a.id),
            "steps": _steps(an_a),
            "gpu_work": catalog.gpu_work(an_a.metrics),
            "api": url_for("api.get_run", run_id=info_a.id),
        },
        "b": {
            "run": info_b.to_dict(),
            "lanes": store.lanes(info_b.id),
            "steps": _steps(an_b),
            "gpu_work": catalog.gpu_work(an_b.metrics),
            "api": url_for("api.get_run", run_id=info_b.id),
        },
        "ops": result["ops"][:300],
        "ranks": result["ranks"],
        "metrics_catalog": catalog.to_json(gpu),
        "plotly": url_for("assets.plotly_js", tag=plotly_etag()),
        "step_figure": compare_steps_figure(
            frame_records(an_a.per_step), frame_records(an_b.per_step), f"A: {info_a.name}", f"B: {info_b.name}"
        ),
    }
    return render_template(
        "compare.html",
        a=info_a.to_dict(),
        b=info_b.to_dict(),
        page=page_data,
        verdict=verdict_of(compared).to_dict(),
        headline=headline,
        findings=result["findings"],
        finding_costs=result["finding_costs"],
        notes=result["notes"],
        all_rows=others,
    )
