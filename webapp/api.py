"""The JSON API behind the pages (documented in the README).

GET    /api/runs                          the catalog, newest first
POST   /api/runs?name=FILE                upload one trace (raw body, or multipart field ``file``)
GET    /api/ingest                        the memory budget and the uploads loading or queued
POST   /api/runs/merge                    upload one file per rank (multipart fields ``file``) or one zip: one run
GET    /api/runs/<id>                     one run: catalog row, metadata, lanes
PATCH  /api/runs/<id>   {"name": ...}     rename
DELETE /api/runs/<id>                     delete
GET    /api/runs/<id>/analysis            metrics, findings, what-if, per-step and per-kernel tables
GET    /api/runs/<id>/timeline            level-of-detail slice: ?start_ns&end_ns&width_px[&rank]
GET    /api/runs/<id>/intervals?ids=1,2   full rows of a few intervals (at most 1,000)
GET    /api/compare?a=<id>&b=<id>         metric deltas, op diff, findings fixed/new
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, jsonify, request

from webapp.analysis import catalog
from webapp.budget import get_budget
from webapp.explore import ranks_arg
from webapp.figures import rank_heatmap_figures, step_time_figure
from webapp.gate import NAME_NEEDED, SPOOLED_BODY, SPOOLED_FORM
from webapp.ingest import (
    MULTI_RANK_NEEDS,
    IngestError,
    TooLarge,
    base_name,
    ingest_rank_zip,
    ingest_ranks,
    ingest_upload,
    spool_stream,
)
from webapp.lanes import lane_views
from webapp.params import int_arg
from webapp.pipeline import current_analysis, overview_json
from webapp.store import RunInfo, RunNotFound, get_store
from webapp.timeline import MAX_WIDTH_PX, interval_rows, view_payload
from webapp.upload import part_path

bp = Blueprint("api", __name__, url_prefix="/api")

MAX_IDS = 1000


def _info(run_id: str) -> RunInfo:
    try:
        return get_store().get(run_id)
    except RunNotFound:
        abort(404, f"no run with id {run_id!r}")


@bp.get("/runs")
def list_runs() -> Response:
    return jsonify({"runs": [r.to_dict() for r in get_store().list_runs()]})


@bp.post("/runs")
def upload() -> tuple[Response, int]:
    """Store one uploaded trace. 201 with the run; 400/413 with {"error"} and nothing stored.

    ``?step_at=SPEC`` places its steps, as ``--step-at``; ``?ticket=`` (optional, chosen by the client) names
    the upload in GET /api/ingest while it waits.
    """
    store = get_store()
    limit = int(current_app.config["MAX_CONTENT_LENGTH"] or 2**62)
    spooled = request.environ.get(SPOOLED_BODY)  # the server wrote the body (or its file part) to this file
    form = request.environ.get(SPOOLED_FORM)  # a multipart body the server parsed while it arrived
    gone = request.environ.get("waitress.client_disconnected") or (lambda: False)
    fields: Any = request.args
    if form is not None:
        if form["error"]:
            abort(400, form["error"])
        if not form["filename"]:
            abort(400, "no file in the upload (multipart field 'file')")
        stream, filename, fields = None, form["filename"], form["fields"]
    elif request.mimetype == "multipart/form-data":
        upload_file = request.files.get("file")
        if upload_file is None:
            abort(400, "no file in the upload (multipart field 'file')")
        stream, filename, fields = upload_file.stream, upload_file.filename or "", request.form
        spooled = part_path(upload_file.stream)  # written straight into uploads/ (webapp.upload)
    else:
        stream, filename = request.stream, request.args.get("name", "")
    if not filename:
        abort(400, NAME_NEEDED)
    step_at = (request.args.get("step_at") or fields.get("step_at") or "").strip() or None
    ticket = request.args.get("ticket", "")[:64]
    try:
        path = Path(spooled) if spooled else spool_stream(store, stream or request.stream, filename, limit)
        try:
            info = ingest_upload(store, get_budget(), path, filename, ticket=ticket, gone=gone, step_at=step_at)
        finally:
            if not spooled:
                path.unlink(missing_ok=True)
    except TooLarge as exc:
        abort(413, f"{_basename(filename)}: {exc}")
    except IngestError as exc:
        abort(400, f"{_basename(filename)}: {exc}")
    return jsonify({"run": info.to_dict(), "url": f"/runs/{info.id}"}), 201


@bp.get("/ingest")
def ingest_queue() -> Response:
    """The memory budget and the uploads being ingested or queued, oldest first."""
    budget = get_budget()
    jobs = [{"ticket": j.ticket, "state": j.state, "need_bytes": j.need_bytes} for j in budget.jobs()]
    return jsonify({"budget_bytes": budget.budget_bytes, "in_use_bytes": budget.in_use_bytes, "jobs": jobs})


@bp.post("/runs/merge")
def upload_ranks() -> tuple[Response, int]:
    """Store the per-rank files of one job (multipart, one ``file`` field per rank, or one ``file`` that is a
    zip of them) as one multi-rank run, clocks aligned. 201 with the run; 400/413 with {"error"} and nothing
    stored."""
    uploads = request.files.getlist("file") if request.mimetype == "multipart/form-data" else []
    if not uploads:
        abort(400, f"{MULTI_RANK_NEEDS} (multipart fields 'file')")
    limit = int(current_app.config["MAX_CONTENT_LENGTH"] or 2**62)
    workers = current_app.config["RANK_WORKERS"]
    try:
        if len(uploads) == 1:  # a zip of the rank files (ingest_rank_zip checks its bytes)
            f = uploads[0]
            info = ingest_rank_zip(get_store(), f.stream, f.filename or "", limit, get_budget(), workers=workers)
        else:
            files = [(f.stream, f.filename or "") for f in uploads]
            info = ingest_ranks(get_store(), files, limit, get_budget(), workers=workers)
    except TooLarge as exc:
        abort(413, str(exc))
    except IngestError as exc:
        abort(400, str(exc))
    return jsonify({"run": info.to_dict(), "url": f"/runs/{info.id}"}), 201


def _basename(filename: str) -> str:
    return base_name(filename)[:200]


@bp.get("/runs/<run_id>")
def get_run(run_id: str) -> Response:
    info = _info(run_id)
    index = get_store().index(run_id)  # meta and lanes without reading the whole run
    return jsonify({"run": info.to_dict(), "meta": index.meta.to_dict(), "lanes": lane_views(index.lanes)})


@bp.patch("/runs/<run_id>")
def rename_run(run_id: str) -> Response:
    _info(run_id)
    body: Any = request.get_json(silent=True)
    name = body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str) or not name.strip():
        abort(400, 'send JSON {"name": "new name"} with a non-empty name')
    if len(name) > 200:
        abort(400, "a run name is at most 200 characters")
    return jsonify({"run": get_store().rename(run_id, name.strip()).to_dict()})


@bp.delete("/runs/<run_id>")
def delete_run(run_id: str) -> Response:
    _info(run_id)
    get_store().delete(run_id)
    return jsonify({"deleted": run_id})


@bp.get("/runs/<run_id>/timeline")
def timeline(run_id: str) -> Response:
    """Level-of-detail slice. start_ns/end_ns are relative to the run start (``origin_ns``); ``ranks``
    (comma-separated, ``none`` for no rank) keeps the lanes of those ranks only."""
    _info(run_id)
    t_open = time.perf_counter()
    index = get_store().index(run_id)  # a run not in memory: its saved index, memory-mapped
    open_ms = (time.perf_counter() - t_open) * 1000
    span = index.end_ns - index.origin_ns
    start = int_arg("start_ns", 0)
    end = int_arg("end_ns", max(1, span))
    if end <= start:
        abort(400, "end_ns must be greater than start_ns")
    width = int_arg("width_px", 1200, 1, MAX_WIDTH_PX)
    rank = request.args.get("rank")
    rank_value = int_arg("rank") if rank not in (None, "") else None
    shown = ranks_arg()
    t0 = time.perf_counter()
    payload = view_payload(index, index.origin_ns + start, index.origin_ns + end, width, rank=rank_value, ranks=shown)
    response = _fast_json(payload)
    response.headers["Server-Timing"] = f"lod;dur={(time.perf_counter() - t0) * 1000:.1f}, open;dur={open_ms:.1f}"
    return response


@bp.get("/runs/<run_id>/overview")
def overview(run_id: str) -> Response:
    """The whole run's timeline slice, stored at ingest (same shape as /timeline)."""
    _info(run_id)
    store = get_store()
    body = store.overview(run_id)
    if body is None:  # a run stored by an older version: compute it outside the store, keep it
        body = overview_json(store.index(run_id))
        store.save_overview(run_id, body)
    store.warm(run_id)  # the page will zoom next: have the index ready
    return Response(body, mimetype="application/json")


@bp.after_request
def _compress(response: Response) -> Response:
    """gzip large JSON answers for clients that accept it."""
    if (
        response.mimetype == "application/json"
        and not response.direct_passthrough
        and "gzip" in request.headers.get("Accept-Encoding", "")
        and "Content-Encoding" not in response.headers
    ):
        data = response.get_data()
        if len(data) > 2048:
            import gzip

            response.set_data(gzip.compress(data, 1))
            response.headers["Content-Encoding"] = "gzip"
            response.headers["Vary"] = "Accept-Encoding"
    return response


@bp.get("/runs/<run_id>/intervals")
def intervals(run_id: str) -> Response:
    _info(run_id)
    raw = request.args.get("ids", "")
    try:
        ids = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        abort(400, "ids must be a comma-separated list of interval ids")
    if len(ids) > MAX_IDS:
        abort(400, f"at most {MAX_IDS} ids per request")
    return jsonify({"intervals": interval_rows(get_store().index(run_id), ids)})


def _fast_json(payload: Any) -> Response:
    import msgspec

    return Response(msgspec.json.encode(payload), mimetype="application/json")


@bp.get("/runs/<run_id>/analysis")
def run_analysis(run_id: str) -> Response:
    """The stored analysis (RunAnalysis.to_dict()) plus ``step_figure``, a Plotly figure of step times, and
    ``rank_figures`` (runs of several ranks): rank x step heatmaps of step time and wait."""
    _info(run_id)
    analysis = current_analysis(get_store(), run_id)
    analysis.pop("critical_path", None)  # served by range: /critical
    gpu = catalog.gpu_work(analysis.get("metrics") or {})
    analysis["step_figure"] = step_time_figure(analysis.get("per_step") or [], gpu=gpu)
    analysis["rank_figures"] = rank_heatmap_figures((analysis.get("ranks") or {}).get("grid") or {})
    return _fast_json(analysis)
