"""The checks a request passes before any byte of its body is read: Host, token, size, upload name.

An upload is never judged by its file name's suffix: its format is recognised from its first bytes once it
is on disk (collector.importers.registry); the name only names the run.

:func:`check_headers` is pure (request line and headers in, a :class:`Refusal` or None out), so the same
rules run in two places: in the HTTP server while it parses the headers (webapp.server, before the body is
spooled anywhere) and in Flask's ``before_request`` (the test client and any other WSGI server).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from webapp.formatting import fmt_bytes

TOKEN_COOKIE = "streamscope_token"
LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]", "::1")
UPLOAD_PATH = "/api/runs"
NAME_NEEDED = "the upload needs a file name (?name=...)"
SPOOLED_BODY = "streamscope.spooled_body"
"""WSGI environ key: the path of the file the server wrote an upload's body to (webapp.server)."""
SPOOLED_FORM = "streamscope.spooled_form"
"""WSGI environ key, for a multipart upload the server parsed while it arrived: ``filename``, ``fields``
(name -> text) and ``error`` ("" when the body was well formed); SPOOLED_BODY holds the file part alone."""


@dataclass(frozen=True)
class Refusal:
    """An answer given instead of running the request: HTTP status and a one-line message."""

    status: int
    message: str


def host_name(host: str) -> str:
    """The name part of a Host header (``[::1]:8050`` -> ``[::1]``, ``a.b:80`` -> ``a.b``)."""
    return host if host.endswith("]") else host.rsplit(":", 1)[0]


def given_token(query: Mapping[str, str], headers: Mapping[str, str]) -> str:
    """The token a request carries: ``Authorization: Bearer``, else ``?token=``, else the cookie.

    ``headers`` keys are lower case.
    """
    auth = headers.get("authorization", "")
    if auth.startswith("Bearer "):
        return auth[len("Bearer ") :]
    if query.get("token"):
        return query["token"]
    try:
        morsel = SimpleCookie(headers.get("cookie", "")).get(TOKEN_COOKIE)
    except CookieError:
        return ""
    return morsel.value if morsel is not None else ""


def check_headers(
    config: Mapping[str, Any], method: str, path: str, query_string: str, headers: Mapping[str, str]
) -> Refusal | None:
    """None when the request may proceed; else the refusal (403 Host, 401 token, 413 size, 400 no name).

    ``headers`` keys are lower case; ``config`` is the app's config (LOCAL_ONLY, TOKEN,
    MAX_CONTENT_LENGTH) plus ``MAX_TRACE_BYTES``: the largest plain trace the memory budget can load.
    """
    if config.get("LOCAL_ONLY") and host_name(headers.get("host", "")).lower() not in LOCAL_NAMES:
        return Refusal(403, "this server only answers requests addressed to 127.0.0.1 or localhost")
    query = {k: v[0] for k, v in parse_qs(query_string, keep_blank_values=True).items()}
    token = config.get("TOKEN")
    if token and not hmac.compare_digest(given_token(query, headers).encode(), str(token).encode()):
        return Refusal(401, "this server needs its access token: open the URL printed by `streamscope serve`")
    length = _content_length(headers)
    limit = config.get("MAX_CONTENT_LENGTH")
    if limit and length > limit:
        return Refusal(413, f"upload too large: the limit is {limit:,} bytes")
    if method == "POST" and path == UPLOAD_PATH and not is_multipart(headers):
        return _check_raw_upload(config, query.get("name", ""), length)
    return None


def is_multipart(headers: Mapping[str, str]) -> bool:
    return headers.get("content-type", "").lower().startswith("multipart/form-data")


def _content_length(headers: Mapping[str, str]) -> int:
    raw = headers.get("content-length", "")
    return int(raw) if raw.isdigit() else 0


def _check_raw_upload(config: Mapping[str, Any], name: str, length: int) -> Refusal | None:
    if not name:
        return Refusal(400, NAME_NEEDED)
    most = config.get("MAX_TRACE_BYTES")
    # a body larger than the largest plain trace the budget can load can never load: a gzip inflates to
    # at least about its own size, so this holds whatever the format turns out to be
    if most and length > most:
        return Refusal(
            413,
            f"{name[:200]}: a {fmt_bytes(length)} trace needs more memory to load than this server's budget "
            f"allows (at most {fmt_bytes(most)}; see --max-memory)",
        )
    return None
