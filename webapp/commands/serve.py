"""Serve the web app: browse, upload, record and compare runs (waitress, a production WSGI server).

Binds 127.0.0.1 by default. Binding any other address needs --token (every request must then carry it)
or an explicit --insecure. Runs are stored in the data folder (SQLite catalog + one Parquet file per run);
on its first start the folder imports every trace in sample_traces/.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import secrets

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8050, help="port (default 8050; 0 picks a free one)")
    parser.add_argument("--data", default="streamscope-data", help="data folder (default ./streamscope-data)")
    parser.add_argument(
        "--token", default=None, help="access token every request must carry; 'auto' makes one up and prints it"
    )
    parser.add_argument("--insecure", action="store_true", help="allow binding a non-local address without a token")
    parser.add_argument("--max-upload-mb", type=int, default=2048, help="upload size limit in MB (default 2048)")
    parser.add_argument("--threads", type=int, default=8, help="worker threads (default 8)")
    parser.add_argument("--no-samples", action="store_true", help="do not import sample_traces/ on first start")


def run(args: argparse.Namespace) -> int:
    from webapp.cli import CliError

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

    from waitress.server import create_server

    from webapp import create_app

    limit = args.max_upload_mb * 1024 * 1024
    app = create_app(
        {
            "DATA_DIR": data,
            "TOKEN": token,
            "MAX_CONTENT_LENGTH": limit,
            "IMPORT_SAMPLES": not args.no_samples,
            "WARM_RUNS": 1,
            "LOCAL_ONLY": args.host in LOCAL_HOSTS,
        }
    )
    # Everything imported and built so far lives as long as the server: move it out of the garbage
    # collector's reach, so a full collection (~70 ms with pandas/pyarrow loaded) never lands on a request.
    gc.collect()
    gc.freeze()
    try:
        server = create_server(
            app,
            host=args.host,
            port=args.port,
            threads=args.threads,
            max_request_body_size=limit + (1 << 20),
            clear_untrusted_proxy_headers=True,
        )
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    port = getattr(server, "effective_port", args.port)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    runs = len(app.extensions["streamscope.store"].list_runs())
    print(f"Streamscope serving {runs} run(s) from {data}", flush=True)
    print(f"Open {url}  (Ctrl+C to stop)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0
