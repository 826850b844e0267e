"""Page: two runs one above the other, step-aligned on one time scale, with metric deltas and op diff."""

from __future__ import annotations

from flask import Blueprint, abort, render_template, request

from webapp import get_store
from webapp.store import RunNotFound

bp = Blueprint("compare", __name__)


@bp.get("/compare")
def page() -> str:
    a, b = request.args.get("a", ""), request.args.get("b", "")
    store = get_store()
    if not a or not b:
        runs = [r.to_dict() for r in store.list_runs()]
        return render_template("compare_pick.html", runs=runs)
    try:
        info_a, info_b = store.get(a), store.get(b)
    except RunNotFound as exc:
        abort(404, f"no run with id {exc.args[0]!r}")
    return render_template("compare.html", a=info_a.to_dict(), b=info_b.to_dict())
