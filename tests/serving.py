"""Run a real ``streamscope serve`` in a subprocess on a free port, for the web and browser tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """Poll ``url`` until it answers (raise if the server exits or never answers)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.05)  # polling interval, not a wait for a fixed time
    raise RuntimeError(f"server at {url} did not answer in {timeout_s} s")


@contextmanager
def running_server(
    samples: Path,
    data: Path,
    cwd: Path,
    stdout: int | IO[bytes] = subprocess.DEVNULL,
    args: tuple[str, ...] = (),
    ready_path: str = "/",
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``streamscope serve`` importing ``samples`` into ``data`` (more options in ``args``); yields
    (base url, process) once ``ready_path`` answers 200, then stops it."""
    port = free_port()
    env = {**os.environ, "STREAMSCOPE_SAMPLES_DIR": str(samples), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "webapp.cli", "serve", "--port", str(port), "--data", str(data), *args],
        cwd=cwd,
        env=env,
        stdout=stdout,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base + ready_path, proc)
        yield base, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
