"""Serve the web app: browse, upload, record and compare runs (waitress, a production WSGI server).

Binds 127.0.0.1 by default. Binding any other address needs --token (every request must then carry it)
or an explicit --insecure. Runs are stored in the data folder (SQLite catalog + one Parquet file per run);
on its first start the folder imports every trace in sample_traces/.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import os
import secrets

from webapp.commands.errors import CliError

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", metavar="ADDRESS", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8050, metavar="PORT", help="port (default 8050; 0 picks a free one)"
    )
    parser.add_argument(
        "--data", default="streamscope-data", metavar="DIR", help="data folder (default ./streamscope-data)"
    )
    parser.add_argument(
        "--token",
        default=None,
        metavar="TOKEN",
        help="access token every request must carry; 'auto' makes one up and prints it",
    )
    parser.add_argument("--insecure", action="store_true", help="allow binding a non-local address without a token")
    parser.add_argument(
        "--max-upload-mb", type=int, default=2048, metavar="MiB", help="upload size limit in MiB (default 2048: 2 GiB)"
    )
    parser.add_argument("--threads", type=int, default=8, metavar="N", help="worker threads (default 8)")
    parser.add_argument(
        "--max-memory",
        default=None,
        metavar="SIZE",
        help="memory budget of ingest, e.g. 6G or 1500M (default: a quarter of this machine's RAM); uploads "
        "wait in line for it, and one that could never fit is refused",
    )
    parser.add_argument("--no-samples", action="store_true", help="do not import sample_traces/ on first start")


def parse_size(text: str) -> int:
    """Bytes from ``1500M``, ``6G``, ``6GB`` or a plain number of bytes; raises CliError otherwise."""

    units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    raw = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (raw[:-1], raw[-1]) if raw[-1:] in units else (raw, "")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise CliError(f"--max-memory {text}: give a size such as 6G or 1500M") from None
    if value < 64 * 1024**2:
        raise CliError(f"--max-memory {text}: must be at least 64M")
    return int(value)


def _log_requests() -> None:
    """One line per request on stderr (webapp.server's ``streamscope.access`` log)."""
    import logging
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    access = logging.getLogger("streamscope.access")
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False


def run(args: argparse.Namespace) -> int:
    from webapp.budget import default_budget_bytes
    from webapp.formatting import fmt_bytes

    if not 0 <= args.port <= 65535:
        raise CliError(f"--port {args.port}: must be 0..65535")
    if args.max_upload_mb <= 0:
        raise CliError("--max-upload-mb must be positive")
    token = args.token
    if token == "auto":
        token = secrets.token_urlsafe(18)
    if args.host not in LOCAL_HOSTS and not token and not args.insecure:
        raise CliError(
            f"--host {args.host} exposes your traces to the network: add --token TOKEN (or --token auto), "
            "or --insecure if you really mean it"
        )
    data = os.path.abspath(args.data)
    try:
        os.makedirs(data, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--data {args.data}: cannot create the data folder ({exc.strerror})") from None

    from webapp import create_app
    from webapp.server import make_server

    limit = args.max_upload_mb * 1024 * 1024
    budget = parse_size(args.max_memory) if args.max_memory else default_budget_bytes()
    _log_requests()
    app = create_app(
        {
            "MAX_MEMORY": budget,
            "DATA_DIR": data,
            "TOKEN": token,
            "MAX_CONTENT_LENGTH": limit,
            "IMPORT_SAMPLES": not args.no_samples,
            "WARM_RUNS": 1,
            "REFRESH_ANALYSES": True,
            "LOCAL_ONLY": args.host in LOCAL_HOSTS,
        }
    )
    # Everything imported and built so far lives as long as the server: move it out of the garbage
    # collector's reach, so a full collection (~70 ms with pandas/pyarrow loaded) never lands on a request.
    gc.collect()
    gc.freeze()
    try:
        server = make_server(app, args.host, args.port, args.threads, limit + (1 << 20))
    except OSError as exc:
        hint = ""
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            hint = " (pick another port with --port N, or --port 0 for any free one)"
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}{hint}") from None
    port = getattr(server, "effective_port", args.port)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    runs = len(app.extensions["streamscope.store"].list_runs())
    print(f"Streamscope serving {runs} run(s) from {data}; ingest memory budget {fmt_bytes(budget)}", flush=True)
    print(f"Open {url}  (Ctrl+C to stop)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0
