"""Page: upload traces (file picker or drag-and-drop, several at once, per-file progress and errors).

The page sends each file to ``POST /api/runs`` (see webapp.api); nothing of a failing file is stored.
:class:`UploadRequest` makes Flask write a multipart upload's file parts straight into the data folder's
``uploads/`` (one copy on disk) when the body reaches the app unparsed (any WSGI server but webapp.server,
which parses it while it arrives); they are removed when the request ends.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import IO, Any

from flask import Blueprint, Flask, Request, current_app, render_template

from webapp.gate import UPLOAD_PATH

bp = Blueprint("upload", __name__)
PARTS = "streamscope.upload_parts"
"""WSGI environ key: the files this request's multipart parts were written to."""


@bp.get("/upload")
def page() -> str:
    return render_template("upload.html", limit=current_app.config["MAX_CONTENT_LENGTH"])


class UploadRequest(Request):
    """Flask's request, with the file parts of an upload written into ``uploads/`` instead of a temp file."""

    def _get_file_stream(
        self,
        total_content_length: int | None,
        content_type: str | None,
        filename: str | None = None,
        content_length: int | None = None,
    ) -> IO[bytes]:
        if self.method != "POST" or self.path != UPLOAD_PATH:
            return super()._get_file_stream(total_content_length, content_type, filename, content_length)
        path = current_app.extensions["streamscope.store"].uploads_dir / f"{secrets.token_hex(8)}.part"
        self.environ.setdefault(PARTS, []).append(path)
        return open(path, "w+b")  # noqa: SIM115 - werkzeug closes it with the request


def part_path(stream: Any) -> str | None:
    """The file in ``uploads/`` an UploadRequest wrote a part to (None for any other stream)."""
    name = getattr(stream, "name", None)
    return name if isinstance(name, str) and name.endswith(".part") else None


def register(app: Flask) -> None:
    """Use UploadRequest; remove its part files when each request ends."""
    from flask import request

    app.request_class = UploadRequest

    @app.teardown_request
    def _remove_parts(_exc: BaseException | None) -> None:
        for path in request.environ.get(PARTS, ()):
            Path(path).unlink(missing_ok=True)
