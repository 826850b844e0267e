"""Streamscope web app: everything that consumes traces (analysis, storage, pages, JSON API).

:func:`create_app` is the Flask application factory. Importing this package imports neither Flask nor
torch; ``create_app`` does the Flask work.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webapp.gate import TOKEN_COOKIE

if TYPE_CHECKING:
    from flask import Flask

log = logging.getLogger(__name__)

DEFAULT_DATA_DIR = "streamscope-data"
DEFAULT_MAX_UPLOAD_BYTES = 2 * 1024**3
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
"""The repository (or install) root; sample traces live in ``PACKAGE_ROOT / "sample_traces"``."""


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """Build the app. Config keys (all optional):

    DATA_DIR            data folder (SQLite catalog + run files); default ./streamscope-data
    MAX_CONTENT_LENGTH  upload limit in bytes; default 2 GiB
    MAX_MEMORY          memory budget of ingest in bytes (webapp.budget); default a quarter of the RAM.
                        Uploads, recordings and the first start's samples wait in line for it; an upload
                        that could never fit is refused with 413 (a recording fails, a sample is skipped)
    TOKEN               when set, every request must carry it (``?token=``, ``Authorization: Bearer``
                        or the cookie set after the first ``?token=``)
    IMPORT_SAMPLES      import every trace in SAMPLES_DIR on first start (default True)
    SAMPLES_DIR         default $STREAMSCOPE_SAMPLES_DIR or PACKAGE_ROOT/sample_traces
    RECORD_ENABLED      force recording on/off (default: detect CUDA in a subprocess)
    RECORD_COMMAND      the recorder's argv prefix (default: [sys.executable, "-m", "collector"])
    LOCAL_ONLY          answer only requests whose Host is 127.0.0.1, localhost or [::1] (what
                        ``streamscope serve`` sets when it binds a loopback address: stops DNS rebinding)
    CACHE_RUNS          runs kept in memory for the timeline (default 3; a 10M-interval run takes ~1.5 GB)
    WARM_RUNS           load this many of the newest runs into memory in the background (default 0;
                        ``streamscope serve`` uses 1) so the first zoom does not wait for the disk
    RANK_WORKERS        processes that load the files of a multi-rank upload (default None: the CPU
                        count; 1 loads them one after another in the request's thread)
    """
    from flask import Flask

    from webapp.budget import default_budget_bytes

    app = Flask(__name__)
    app.config.from_mapping(
        DATA_DIR=os.path.abspath(DEFAULT_DATA_DIR),
        MAX_CONTENT_LENGTH=DEFAULT_MAX_UPLOAD_BYTES,
        TOKEN=None,
        IMPORT_SAMPLES=True,
        SAMPLES_DIR=os.environ.get("STREAMSCOPE_SAMPLES_DIR") or str(PACKAGE_ROOT / "sample_traces"),
        RECORD_ENABLED=None,
        WARM_RUNS=0,
        REFRESH_ANALYSES=False,
        CACHE_RUNS=3,
        RANK_WORKERS=None,
        LOCAL_ONLY=False,
        MAX_MEMORY=default_budget_bytes(),
        JSON_SORT_KEYS=False,
    )
    if test_config:
        app.config.update(test_config)
    app.json.sort_keys = False  # type: ignore[attr-defined]

    from webapp.budget import MemoryBudget, largest_file_bytes
    from webapp.store import Store

    store = Store(app.config["DATA_DIR"], cache_runs=int(app.config["CACHE_RUNS"]))
    app.extensions["streamscope.store"] = store
    budget = app.extensions["streamscope.budget"] = MemoryBudget(int(app.config["MAX_MEMORY"]))
    if app.config["IMPORT_SAMPLES"]:
        from webapp.ingest import import_samples

        import_samples(store, Path(app.config["SAMPLES_DIR"]), budget)

    if app.config["REFRESH_ANALYSES"]:  # after an upgrade: the runs list shows this version's summaries
        from webapp.pipeline import refresh_stale_analyses

        app.extensions["streamscope.refresh"] = refresh_stale_analyses(store)
    for info in store.list_runs()[: int(app.config["WARM_RUNS"])]:
        store.warm(info.id)
    app.config["MAX_TRACE_BYTES"] = largest_file_bytes(int(app.config["MAX_MEMORY"]))
    _install_gate(app)
    from webapp import api, compare, errors, explore, formatting, record, runs, static_assets, upload

    errors.register(app)
    formatting.register(app)
    upload.register(app)
    for module in (runs, upload, record, compare, api, explore, static_assets):
        app.register_blueprint(module.bp)
    return app


def _install_gate(app: Flask) -> None:
    """Host, token and size checks (webapp.gate) before every request; webapp.server runs the same ones
    before it reads a body."""
    from flask import Response, request

    from webapp.errors import error_response
    from webapp.gate import check_headers

    @app.before_request
    def _gate() -> tuple[Response | str, int] | None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        refusal = check_headers(
            app.config, request.method, request.path, request.query_string.decode("latin-1"), headers
        )
        return error_response(refusal.status, refusal.message) if refusal else None

    token = app.config.get("TOKEN")
    if not token:
        return

    @app.after_request
    def _remember(response: Response) -> Response:
        if request.args.get("token"):
            response.set_cookie(TOKEN_COOKIE, str(token), httponly=True, samesite="Strict")
        return response
