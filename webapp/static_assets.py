"""Plotly's JavaScript served from the installed plotly package: gzip-compressed, cached by the browser.

The app never loads anything from a CDN; pages work with no network at all.
"""

from __future__ import annotations

import gzip
import hashlib
from functools import lru_cache
from pathlib import Path

from flask import Blueprint, Response, request

bp = Blueprint("assets", __name__)

ONE_YEAR_S = 365 * 24 * 3600


@lru_cache(maxsize=1)
def _plotly_js() -> tuple[bytes, bytes, str]:
    """(raw, gzipped, etag) of plotly.min.js from the installed plotly package."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if path.is_file():
        raw = path.read_bytes()
    else:  # pragma: no cover - older plotly layouts
        from plotly.offline import get_plotlyjs

        raw = get_plotlyjs().encode()
    return raw, gzip.compress(raw, 6), hashlib.sha256(raw).hexdigest()[:20]


def plotly_etag() -> str:
    return _plotly_js()[2]


@bp.get("/assets/plotly-<tag>.min.js")
def plotly_js(tag: str) -> Response:
    raw, packed, etag = _plotly_js()
    if request.if_none_match.contains(etag):
        resp = Response(status=304)
    elif "gzip" in request.headers.get("Accept-Encoding", ""):
        resp = Response(packed, mimetype="application/javascript")
        resp.headers["Content-Encoding"] = "gzip"
    else:
        resp = Response(raw, mimetype="application/javascript")
    resp.headers["Vary"] = "Accept-Encoding"
    resp.set_etag(etag)
    resp.cache_control.public = True
    resp.cache_control.max_age = ONE_YEAR_S
    resp.cache_control.immutable = True
    return resp
