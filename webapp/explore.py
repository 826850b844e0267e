"""The API behind the timeline's exploring tools (documented in the README). Times are ns relative to the
run start (``origin_ns``), as in /timeline.

GET /api/runs/<id>/links?id=N                     launch <-> GPU work and sync wait -> awaited GPU work
GET /api/runs/<id>/queue?start_ns&end_ns&width_px[&rank]   queue depth and host lead per GPU stream
GET /api/runs/<id>/range?start_ns&end_ns[&rank]   what happened in a range (webapp.analysis.rangestats)
GET /api/runs/<id>/ranks?start_ns&end_ns&width_px[&ranks]  summary lanes: busy, comm, idle per rank and bin
GET /api/runs/<id>/search?q[&regex=1][&rank][&start_ns&end_ns][&after=S:ROW|&before=S:ROW][&limit]
                                                  intervals by name in time order, one page at a time
GET /api/runs/<id>/critical?start_ns&end_ns[&rank]   the critical path's stretches in a range
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from flask import Blueprint, Response, abort, request

from collector.model import KIND_NAMES
from webapp.analysis.handoff import Handoff
from webapp.analysis.lod import RunIndex
from webapp.analysis.perindex import PerIndex
from webapp.analysis.rangestats import range_stats
from webapp.analysis.rankview import rank_summary
from webapp.analysis.search import BadPattern, search
from webapp.params import int_arg
from webapp.pipeline import current_analysis
from webapp.store import RunNotFound, Store, get_store
from webapp.timeline import MAX_WIDTH_PX

bp = Blueprint("explore", __name__, url_prefix="/api/runs/<run_id>")

MAX_PAGE = 1000
_handoffs: PerIndex[Handoff] = PerIndex()


def _index(run_id: str) -> RunIndex:
    try:
        return get_store().index(run_id)
    except RunNotFound:
        abort(404, f"no run with id {run_id!r}")


def handoff_of(store: Store, run_id: str, index: RunIndex) -> Handoff:
    """The run's Handoff, built on first use (reads the run file's ``launch_id`` column only) and kept
    as long as its index is cached."""

    def build() -> Handoff:
        import pyarrow.parquet as pq

        launch_id = pq.read_table(store.run_path(run_id), columns=["launch_id"]).column(0).to_numpy()
        return Handoff(index, launch_id)

    return _handoffs.get(index, build)


def _window(index: RunIndex) -> tuple[int, int, list[int]]:
    """(t0, t1) absolute ns from start_ns/end_ns (whole run by default) and the lanes of ``rank``."""
    span = max(1, index.end_ns - index.origin_ns)
    start, end = int_arg("start_ns", 0), int_arg("end_ns", span)
    if end <= start:
        abort(400, "end_ns must be greater than start_ns")
    rank = int_arg("rank") if request.args.get("rank", "") != "" else None
    lanes = [i for i, ln in enumerate(index.lanes) if rank is None or ln.rank == rank]
    return index.origin_ns + start, index.origin_ns + end, lanes


def ranks_arg() -> frozenset[int] | None:
    """The ``ranks`` parameter: comma-separated ranks, ``none`` for no rank; None when absent (all)."""
    raw = request.args.get("ranks", "").strip()
    if raw == "":
        return None
    if raw == "none":
        return frozenset()
    try:
        return frozenset(int(x) for x in raw.split(",") if x.strip())
    except ValueError:
        abort(400, f"parameter ranks must be comma-separated rank numbers or 'none', not {raw[:40]!r}")


def _json(payload: Any, t0: float) -> Response:
    import msgspec

    response = Response(msgspec.json.encode(payload), mimetype="application/json")
    response.headers["Server-Timing"] = f"api;dur={(time.perf_counter() - t0) * 1000:.1f}"
    return response


def row_dict(index: RunIndex, row: int) -> dict[str, Any]:
    """One interval of the index as the pages show it: ``s``/``d`` ns relative to origin."""
    c = index.columns
    code = int(c.name[row])
    lane = int(np.searchsorted([hi for _, hi in index.lane_bounds], row, side="right"))
    return {
        "row": row,
        "id": int(c.id[row]),
        "lane": lane,
        "rank": index.lanes[lane].rank,
        "kind": KIND_NAMES[int(index.kind[row])],
        "name": str(c.name_cats[code]) if code >= 0 else "",
        "s": int(index.start[row]) - index.origin_ns,
        "d": int(index.end[row] - index.start[row]),
        "step": int(c.step[row]),
    }


@bp.get("/links")
def links(run_id: str) -> Response:
    """The interval ``id`` and its arrows: ``relation`` launch|waited, ``delay_ns``, ``src``, ``dst``."""
    t0 = time.perf_counter()
    index = _index(run_id)
    ho = handoff_of(get_store(), run_id, index)
    row = int(ho.rows_of_ids(np.asarray([int_arg("id")]))[0])
    if row < 0:
        abort(404, "no interval with that id in this run")
    out = [
        {
            "relation": link.relation,
            "delay_ns": link.delay_ns,
            "src": row_dict(index, link.src_row),
            "dst": row_dict(index, link.dst_row),
        }
        for link in ho.links(row)
    ]
    return _json({"interval": row_dict(index, row), "links": out}, t0)


@bp.get("/queue")
def queue(run_id: str) -> Response:
    """Per GPU lane, ``width_px`` slices of the window: ``depth`` (max ops queued and unfinished in the
    slice) and ``lead_ns`` (max host lead); ``px_ns`` is the slice length."""
    t0 = time.perf_counter()
    index = _index(run_id)
    a, b, lanes = _window(index)
    width = int_arg("width_px", 1200, 1, MAX_WIDTH_PX)
    ho = handoff_of(get_store(), run_id, index)
    out = []
    for lane in lanes:
        q = ho.queues.get(lane)
        if q is None:
            continue
        depth, lead = q.view(a, b, width)
        out.append({"lane": lane, "rank": index.lanes[lane].rank, "depth": depth.tolist(), "lead_ns": lead.tolist()})
    body = {"start_ns": a - index.origin_ns, "end_ns": b - index.origin_ns, "px_ns": (b - a) / width, "lanes": out}
    return _json(body, t0)


@bp.get("/range")
def range_view(run_id: str) -> Response:
    t0 = time.perf_counter()
    index = _index(run_id)
    a, b, lanes = _window(index)
    return _json(range_stats(index, a, b, lanes).to_dict(index.origin_ns), t0)


def _cursor(name: str, origin: int) -> tuple[int, int] | None:
    raw = request.args.get(name, "")
    if not raw:
        return None
    try:
        s, row = raw.split(":", 1)
        return origin + int(s), int(row)
    except ValueError:
        abort(400, f"parameter {name} must be START_NS:ROW as given by a match's cursor, not {raw[:40]!r}")


@bp.get("/search")
def search_names(run_id: str) -> Response:
    """``total`` matches in the window, ``names`` that matched (first 50) and one page of ``matches`` in
    time order, each with a ``cursor`` for ``after``/``before``."""
    t0 = time.perf_counter()
    index = _index(run_id)
    text = request.args.get("q", "")
    if not text:
        abort(400, "missing parameter q (the text or regular expression to find)")
    a, b, lanes = _window(index)
    limit = int_arg("limit", 100, 1, MAX_PAGE)
    after, before = _cursor("after", index.origin_ns), _cursor("before", index.origin_ns)
    try:
        page = search(
            index,
            text,
            regex=request.args.get("regex", "") in ("1", "true"),
            lanes=lanes,
            t0=a,
            t1=b,
            after=after,
            before=before,
            limit=limit,
        )
    except BadPattern as exc:
        abort(400, str(exc))
    matches = [row_dict(index, int(r)) for r in page.rows]
    for m in matches:
        m["cursor"] = f"{m['s']}:{m['row']}"
    return _json({"total": page.total, "names": page.names, "matches": matches}, t0)


MAX_STRETCHES = 20_000


@bp.get("/critical")
def critical_path(run_id: str) -> Response:
    """The critical path's stretches (webapp.analysis.causal.critical) that overlap the range, at most
    MAX_STRETCHES: ``stretches`` of lane, s (ns from the run start), d (ns) and part; ``more`` when cut."""
    t0 = time.perf_counter()
    index = _index(run_id)
    a, b, lanes = _window(index)
    path = current_analysis(get_store(), run_id).get("critical_path") or {}
    start = np.asarray(path.get("start_ns") or [], dtype=np.int64)
    end = np.asarray(path.get("end_ns") or [], dtype=np.int64)
    lane = np.asarray(path.get("lane") or [], dtype=np.int64)
    hit = np.flatnonzero((end > a) & (start < b) & np.isin(lane, lanes))
    more = len(hit) > MAX_STRETCHES
    parts = path.get("part") or []
    stretches = [
        {"lane": int(lane[i]), "s": int(start[i] - index.origin_ns), "d": int(end[i] - start[i]), "part": parts[i]}
        for i in hit[:MAX_STRETCHES]
    ]
    return _json({"stretches": stretches, "more": more}, t0)


@bp.get("/ranks")
def rank_lanes(run_id: str) -> Response:
    """One summary lane per rank of ``ranks`` (all by default): webapp.analysis.rankview.rank_summary."""
    t0 = time.perf_counter()
    index = _index(run_id)
    a, b, _ = _window(index)
    width = int_arg("width_px", 1200, 1, MAX_WIDTH_PX)
    shown = ranks_arg()
    return _json(rank_summary(index, a, b, width, None if shown is None else sorted(shown)), t0)
