"""Helpers shared by the web and browser tests: an XSS-named trace, free ports, readiness polling."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from dataclasses import replace
from pathlib import Path

from collector.model import Trace
from collector.synthetic import synthetic_trace

EVIL = "</script><img src=x onerror=alert(1)>"
REPO = Path(__file__).resolve().parents[2]


def evil_trace(n: int = 400) -> Trace:
    """A small run whose first kernel name, lane label and workload are an XSS attempt."""
    trace = synthetic_trace(n, pattern="naive", steps=4)
    iv = trace.intervals.copy()
    first = iv["name"].cat.categories[0]
    iv["name"] = iv["name"].cat.rename_categories({first: EVIL})
    return Trace(replace(trace.meta, workload=EVIL), trace.lanes, iv, trace.markers)


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
