"""The bounds of a served upload, against the real server in a subprocess: the token and the size are
checked before the body is read, errors are JSON, a gzip bomb is refused with the server's memory measured
from /proc, a client that disconnects gets nothing stored, and every request leaves one access-log line."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from serving import running_server

from collector.synthetic import synthetic_trace
from collector.traceformat.write import write_trace

TOKEN = "s3cret-token"
LIMIT_MB = 32
BUDGET = "256M"


@dataclass
class Served:
    base: str
    proc: subprocess.Popen[bytes]
    data: Path
    log: Path

    @property
    def uploads(self) -> list[Path]:
        return list((self.data / "uploads").iterdir())

    def runs(self) -> list[dict]:
        req = urllib.request.Request(self.base + "/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return list(json.loads(resp.read())["runs"])

    def ingest(self) -> dict:
        req = urllib.request.Request(self.base + "/api/ingest", headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.loads(resp.read()))

    def hwm_bytes(self) -> int:
        """Peak resident memory of the server process (VmHWM), bytes."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM in /proc")

    def wait_until_no_uploads(self, timeout_s: float = 10) -> None:
        deadline = time.monotonic() + timeout_s
        while self.uploads and time.monotonic() < deadline:
            time.sleep(0.02)  # polling, not a fixed wait
        assert self.uploads == []

    def wait_for_log(self, text: str, timeout_s: float = 60) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            log = self.log.read_text(errors="replace")
            if text in log:
                return log
            time.sleep(0.05)  # polling the log, not a fixed wait
        raise AssertionError(f"{text!r} never appeared in the server log:\n{self.log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("limits")
    (root / "samples").mkdir()
    log = root / "server.log"
    args = ("--token", TOKEN, "--max-upload-mb", str(LIMIT_MB), "--max-memory", BUDGET, "--no-samples")
    with (
        open(log, "wb") as out,
        running_server(
            root / "samples", root / "data", cwd=root, stdout=out, args=args, ready_path=f"/?token={TOKEN}"
        ) as (base, proc),
    ):
        yield Served(base, proc, root / "data", log)


def raw(served: Served, head: str, body: bytes = b"", close_after_send: bool = False) -> tuple[int, dict]:
    """Send a request (``head`` without the blank line) over a plain socket; return (status, JSON body)."""
    url = urlsplit(served.base)
    with socket.create_connection((url.hostname, url.port or 80), timeout=30) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\nConnection: close\r\n\r\n" + body)
        if close_after_send:
            return 0, {}
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    text = b"".join(chunks)
    head_bytes, _, payload = text.partition(b"\r\n\r\n")
    status = int(head_bytes.split(b" ", 2)[1])
    assert b"application/json" in head_bytes, head_bytes
    return status, json.loads(payload)


def upload_head(name: str, length: int, token: str | None = TOKEN) -> str:
    auth = f"\nAuthorization: Bearer {token}" if token else ""
    return f"POST /api/runs?name={name} HTTP/1.1\nHost: 127.0.0.1\nContent-Length: {length}{auth}"


def test_unauthorized_upload_is_refused_before_its_body(served: Served) -> None:
    # only the headers are sent: the answer comes without the server waiting for (or storing) the body
    status, body = raw(served, upload_head("big.json.gz", 1_000_000, token=None))
    assert status == 401 and body["status"] == 401 and "token" in body["error"]
    status, body = raw(served, upload_head("big.json.gz", 1_000_000, token="wrong"))
    assert status == 401
    assert served.uploads == [] and served.runs() == []


def test_too_large_is_413_json_before_its_body(served: Served) -> None:
    status, body = raw(served, upload_head("big.json.gz", LIMIT_MB * 1024 * 1024 + 1))
    assert status == 413 and body == {
        "error": f"upload too large: the limit is {LIMIT_MB * 1024**2:,} bytes",
        "status": 413,
    }
    assert served.uploads == []


def test_chunked_body_past_the_limit_is_413_json(served: Served) -> None:
    piece = b"x" * (1 << 20)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(LIMIT_MB + 1)) + b"0\r\n\r\n"
    head = "POST /api/runs?name=c.json HTTP/1.1\nHost: 127.0.0.1\nTransfer-Encoding: chunked"
    head += f"\nAuthorization: Bearer {TOKEN}"
    status, body = raw(served, head, chunks)
    assert status == 413 and body["status"] == 413 and "upload too large" in body["error"]
    assert served.uploads == [] and served.runs() == []


def test_an_upload_that_is_no_trace_is_refused_by_its_bytes(served: Served) -> None:
    status, body = raw(served, upload_head("notes.json", 10), b"just notes")
    assert status == 400 and body["error"].startswith("notes.json: not a trace file: Streamscope reads")
    served.wait_until_no_uploads()
    assert served.runs() == []


def test_gzip_bomb_is_refused_with_memory_bounded(served: Served) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = packer.compress(b" " * (64 << 20)) + packer.flush()
    bomb = member * 32  # 2 GiB of JSON whitespace in about 2 MB
    before = served.hwm_bytes()
    status, body = raw(served, upload_head("bomb.json.gz", len(bomb)), bomb)
    assert status == 413 and "inflates past" in body["error"] and "--max-memory" in body["error"]
    peak = served.hwm_bytes()
    assert peak < 1024**3, f"server peaked at {peak / 1e6:.0f} MB (was {before / 1e6:.0f} MB)"
    assert served.uploads == [] and served.runs() == []


def test_disconnect_during_ingest_stores_nothing(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "leaver.json"
    write_trace(synthetic_trace(100_000, pattern="naive", steps=10), str(path))
    body = path.read_bytes()
    refused_before = served.log.read_text().count('"POST /api/runs" 400')
    url = urlsplit(served.base)
    with socket.create_connection((url.hostname, url.port or 80), timeout=30) as sock:
        head = upload_head("leaver.json&ticket=leaver", len(body)).replace("\n", "\r\n").encode()
        sock.sendall(head + b"\r\n\r\n" + body)
        deadline = time.monotonic() + 60
        while not any(j["ticket"] == "leaver" for j in served.ingest()["jobs"]):  # loading now
            assert time.monotonic() < deadline, "the upload never reached the ingest queue"
    # the socket is closed: the server notices before it stores the run
    deadline = time.monotonic() + 60
    while served.log.read_text().count('"POST /api/runs" 400') == refused_before:
        assert time.monotonic() < deadline, served.log.read_text()[-2000:]
        time.sleep(0.05)  # polling the log, not a fixed wait
    assert served.runs() == []
    served.wait_until_no_uploads()  # the spooled body is removed just after the request's log line


def test_upload_is_stored_once_and_logged(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "kept.json.gz"
    write_trace(synthetic_trace(3000, pattern="overlap", steps=4), str(path))
    body = path.read_bytes()
    status, answer = raw(served, upload_head("kept.json.gz", len(body)), body)
    assert status == 201 and answer["run"]["name"] == "kept"
    assert [r["id"] for r in served.runs()] == [answer["run"]["id"]]
    served.wait_until_no_uploads()  # the spooled body and its inflated copy are gone
    line = served.wait_for_log('"POST /api/runs" 201').splitlines()
    logged = [ln for ln in line if '"POST /api/runs" 201' in ln][-1]
    assert logged.split()[-4:-2][1] == "ms" and logged.endswith(" B")
    served.runs()
    served.wait_for_log('"GET /api/runs" 200')


def _open_files(pid: int) -> list[str]:
    """Targets of the process's open file descriptors that are files (not sockets, pipes or devices)."""
    out = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("/") and not target.startswith("/dev/"):
            out.append(target)
    return out


def test_multipart_upload_is_written_once_into_the_data_folder(served: Served, tmp_path: Path) -> None:
    """Half-way through a multipart body, the only file the server writes is in uploads/ and holds the file
    part's bytes alone (no spool of the whole body, no temp file); the whole body then stores the run."""
    path = tmp_path / "form.json"
    write_trace(synthetic_trace(20_000, pattern="naive", steps=4), str(path))
    data = path.read_bytes()
    assert len(data) > 1 << 20  # past waitress's in-memory body buffer (512 KiB)
    boundary = "----streamscope-test"
    before = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="step_at"\r\n\r\n\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="form.json"\r\n'
        "Content-Type: application/json\r\n\r\n"
    ).encode()
    body = before + data + f"\r\n--{boundary}--\r\n".encode()
    head = (
        f"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    half = len(before) + len(data) // 2
    url = urlsplit(served.base)
    with socket.create_connection((url.hostname, url.port or 80), timeout=30) as sock:
        sock.sendall(head + body[:half])
        deadline = time.monotonic() + 30
        while not served.uploads or served.uploads[0].stat().st_size < len(data) // 2 - 4096:
            assert time.monotonic() < deadline, "the file part never reached uploads/"
            time.sleep(0.02)  # polling the folder, not a fixed wait
        [part] = served.uploads
        written_so_far = part.read_bytes()  # the part's bytes alone, no multipart framing (a few held back
        assert written_so_far == data[: len(written_so_far)]  # until the parser knows they are not a boundary)
        files = _open_files(served.proc.pid)
        ours = str(served.data.parent)  # the data folder and the server's log
        elsewhere = [t for t in files if "(deleted)" in t or (t.startswith(tempfile.gettempdir()) and ours not in t)]
        assert elsewhere == [] and str(part) in files
        sock.sendall(body[half:])
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 201"), reply[:300]
    stored = json.loads(reply.partition(b"\r\n\r\n")[2])["run"]
    assert stored["name"] == "form" and stored["id"] in [r["id"] for r in served.runs()]
    served.wait_until_no_uploads()
