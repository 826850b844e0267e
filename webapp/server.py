"""The HTTP server (waitress) with the checks that must run before a request's body is read.

waitress reads a whole body into its own spool before it calls the app. Here its request parser runs
webapp.gate as soon as the headers are in: a request without the token, for another Host, too large, or an
upload with a bad name is answered (JSON ``{"error", "status"}``) without storing a byte of its body, and
the rest of that connection's input is dropped. An accepted upload (``POST /api/runs``) is spooled
straight into the data folder's ``uploads/``, where ingest reads it in place (one copy on disk, not two): a
raw body as it comes, a ``multipart/form-data`` body parsed while it arrives, so only its file part's bytes
are written (webapp.spool.MultipartFile). The file is removed when the request ends, or when its client
disconnects half-way. Every request gets one
line in the ``streamscope.access`` log: client, method, path, status, milliseconds, bytes sent.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import secrets
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from waitress.buffers import FileBasedBuffer
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.receiver import ChunkedReceiver, FixedStreamReceiver
from waitress.server import BaseWSGIServer, create_server
from waitress.task import ErrorTask, WSGITask
from waitress.utilities import Error
from werkzeug.http import parse_options_header

from webapp.gate import SPOOLED_BODY, SPOOLED_FORM, UPLOAD_PATH, check_headers, is_multipart
from webapp.spool import MultipartFile

if TYPE_CHECKING:
    from flask import Flask

access_log = logging.getLogger("streamscope.access")
DRAIN_S = 10.0
"""How long a refused request's body is read and dropped after the answer, at most (seconds)."""


class JsonError(Error):
    """A waitress error answered as JSON ``{"error": message, "status": code}``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 413: "Payload Too Large"}.get(
            code, "Error"
        )

    def to_response(self, ident: str | None = None) -> tuple[str, list[tuple[str, str]], bytes]:
        body = json.dumps({"error": self.body, "status": self.code}).encode()
        return f"{self.code} {self.reason}", [("Content-Type", "application/json")], body


def as_json(error: Error) -> JsonError:
    """Any waitress error (its own 400/413/431/500 included) in the JSON shape."""
    if isinstance(error, JsonError):
        return error
    text = str(error.body).strip().splitlines()[0] if str(error.body).strip() else error.reason
    if error.code == 413:
        text = "upload too large: " + text
    return JsonError(error.code, text)


class _SpoolFile(FileBasedBuffer):
    """An upload body written to a named file in the uploads folder; removed on close."""

    def __init__(self, path: Path) -> None:
        super().__init__(open(path, "w+b"))  # noqa: SIM115 - closed by close(), when waitress is done
        self.path = path

    def close(self) -> None:
        super().close()
        self.path.unlink(missing_ok=True)


class _MultipartSpool(_SpoolFile):
    """A multipart upload body: only the bytes of its ``file`` part reach the file (see MultipartFile)."""

    def __init__(self, path: Path, boundary: bytes) -> None:
        super().__init__(path)
        self.form = MultipartFile(boundary, super().append)

    def append(self, s: bytes) -> None:
        self.form.feed(s)

    def finish(self) -> dict[str, Any]:
        """The form once the body is in: ``filename``, ``fields`` and ``error`` (see MultipartFile)."""
        self.form.feed(None)
        return {"filename": self.form.filename, "fields": self.form.fields, "error": self.form.error}


class _Logged:
    """Mixin for waitress tasks: one access-log line when the response is done."""

    request: Any
    channel: Any
    status: str
    content_bytes_written: int

    def service(self) -> None:
        t0 = time.perf_counter()
        try:
            super().service()  # type: ignore[misc]
        finally:
            ms = (time.perf_counter() - t0) * 1000
            addr = self.channel.addr[0] if isinstance(self.channel.addr, tuple) else "-"
            path = self.request.path or "/"
            status = self.status.split(" ", 1)[0]
            access_log.info(
                '%s "%s %s" %s %.1f ms %d B', addr, self.request.command, path, status, ms, self.content_bytes_written
            )


class _Task(_Logged, WSGITask):
    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        spool = getattr(self.request, "spool", None)
        if spool is not None:
            if isinstance(spool, _MultipartSpool):  # the form is parsed: the app reads no body
                environ[SPOOLED_FORM] = spool.finish()
                environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(), "0"
            spool.file.flush()
            environ[SPOOLED_BODY] = str(spool.path)
        return environ


class _ErrorTask(_Logged, ErrorTask):
    def execute(self) -> None:
        self.request.error = as_json(self.request.error)
        super().execute()


def channel_class(app: Flask) -> type[HTTPChannel]:
    """A waitress channel class whose parser runs webapp.gate with ``app``'s config."""
    config = app.config
    uploads: Path = app.extensions["streamscope.store"].uploads_dir

    class Parser(HTTPRequestParser):
        spool: _SpoolFile | None = None

        def __init__(self, adj: Any, channel: Channel | None = None) -> None:
            super().__init__(adj)
            self.channel = channel

        def received(self, data: bytes) -> int:
            if self.channel is not None and self.channel.discard:  # input after a refusal: dropped
                self.completed = self.empty = True
                return len(data)
            consumed = int(super().received(data))
            if self.error is not None and self.channel is not None:  # waitress's own 400/413/431 too
                self.channel.discard = True
            return consumed

        def parse_header(self, header_plus: bytes) -> None:
            super().parse_header(header_plus)
            headers = {k.lower().replace("_", "-"): v for k, v in self.headers.items()}
            refusal = check_headers(config, self.command, self.path, self.query, headers)
            if refusal is not None:
                self.error = JsonError(refusal.status, refusal.message)
                self.body_rcv, self.content_length, self.expect_continue = None, 0, False
                if self.channel is not None:
                    self.channel.discard = True  # the body that follows is never read
                return
            if self.command == "POST" and self.path == UPLOAD_PATH and self.body_rcv is not None:
                self._spool_to_uploads(headers)

        def _spool_to_uploads(self, headers: dict[str, str]) -> None:
            name = f"{secrets.token_hex(8)}"
            if is_multipart(headers):
                boundary = parse_options_header(headers.get("content-type", ""))[1].get("boundary", "")
                if not boundary:
                    return  # the app answers 400: no file in the upload
                self.spool = _MultipartSpool(uploads / f"{name}.part", boundary.encode("latin-1"))
            else:
                self.spool = _SpoolFile(uploads / f"{name}.upload")  # its format is read from its bytes
            if isinstance(self.body_rcv, ChunkedReceiver):
                self.body_rcv = ChunkedReceiver(self.spool)
            else:
                self.body_rcv = FixedStreamReceiver(self.content_length, self.spool)

    class Channel(HTTPChannel):
        """After a refusal, the body that follows is read and dropped (``discard``); once the answer is
        sent, the channel stops writing (FIN) and drains its input for up to DRAIN_S before it closes,
        so the client reads the answer instead of a connection reset."""

        task_class = _Task
        error_task_class = _ErrorTask
        discard = False
        draining = False
        drain_until = 0.0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.parser_class = lambda adj: Parser(adj, self)

        def received(self, data: bytes) -> bool:
            if self.discard:
                return False
            return bool(super().received(data))

        def readable(self) -> bool:
            return True if self.draining else bool(super().readable())

        def writable(self) -> bool:
            if self.draining:
                return time.monotonic() > self.drain_until  # then handle_write closes
            return bool(super().writable())

        def handle_read(self) -> None:
            if self.draining:
                self.recv(1 << 16)  # dropped; at the client's end recv() calls handle_close
                return
            super().handle_read()

        def handle_write(self) -> None:
            if self.draining:
                self.handle_close()
                return
            super().handle_write()

        def handle_close(self) -> None:
            cut: Any = getattr(self, "request", None)
            if cut is not None:  # a body cut off half-way: drop what was spooled
                cut.close()
                setattr(self, "request", None)  # noqa: B010 - waitress declares it untyped
            if self.discard and not self.draining and self.connected and not self.total_outbufs_len:
                self.draining, self.will_close, self.close_when_flushed = True, False, False
                self.drain_until = time.monotonic() + DRAIN_S
                with contextlib.suppress(OSError):
                    self.socket.shutdown(socket.SHUT_WR)
                return
            super().handle_close()

    return Channel


def _query(query: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    return parse_qsl(query, keep_blank_values=True)


def make_server(app: Flask, host: str, port: int, threads: int, max_body_bytes: int) -> Any:
    """A waitress server for ``app`` whose connections run the gate (see the module docstring).

    ``channel_request_lookahead=1`` keeps reading each connection while its request runs, so a client
    that disconnects is noticed (``waitress.client_disconnected``) and its upload not stored.
    """
    server = create_server(
        app,
        host=host,
        port=port,
        threads=threads,
        max_request_body_size=max_body_bytes,
        clear_untrusted_proxy_headers=True,
        channel_request_lookahead=1,
    )
    cls = channel_class(app)
    sockets = getattr(server, "map", None) or server._map  # several listeners, or one
    for listener in list(sockets.values()):
        if isinstance(listener, BaseWSGIServer):
            listener.channel_class = cls
    return server
