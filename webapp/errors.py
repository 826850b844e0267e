"""Error pages: clear 4xx as HTML or JSON (for /api/ and JSON clients), never a stack trace."""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, render_template, request
from werkzeug.exceptions import HTTPException, InternalServerError, RequestEntityTooLarge

log = logging.getLogger(__name__)


def wants_json() -> bool:
    if request.path.startswith("/api/"):
        return True
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def error_response(status: int, message: str) -> tuple[Response | str, int]:
    if wants_json():
        return jsonify({"error": message, "status": status}), status
    return render_template("error.html", status=status, message=message), status


def register(app: Flask) -> None:
    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> tuple[Response | str, int]:
        status = exc.code or 500
        message = exc.description or exc.name
        if status == 413 and message == RequestEntityTooLarge.description:  # werkzeug's own, not ours
            limit = app.config.get("MAX_CONTENT_LENGTH")
            message = f"upload too large: the limit is {limit:,} bytes" if limit else "upload too large"
        return error_response(status, str(message))

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> tuple[Response | str, int]:
        if isinstance(exc, HTTPException):  # pragma: no cover - handled above
            return _http(exc)
        log.exception("unexpected error on %s", request.path)
        return error_response(500, InternalServerError.description)
