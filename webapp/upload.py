"""Page: upload traces (file picker or drag-and-drop, several at once, per-file progress and errors).

The page sends each file to ``POST /api/runs`` (see webapp.api); nothing of a failing file is stored.
"""

from __future__ import annotations

from flask import Blueprint, current_app, render_template

bp = Blueprint("upload", __name__)


@bp.get("/upload")
def page() -> str:
    return render_template("upload.html", limit=current_app.config["MAX_CONTENT_LENGTH"])
