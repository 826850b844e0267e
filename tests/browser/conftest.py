"""Browser tests: Debian's Chromium driven by Playwright against a real `streamscope serve` subprocess."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-output"
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    if not Path(CHROMIUM).exists():
        pytest.skip("browser tests need Debian's chromium at /usr/bin/chromium")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    return {**browser_context_args, "viewport": {"width": 1440, "height": 960}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.05)  # polling interval
    raise RuntimeError(f"server at {url} did not answer in {timeout_s} s")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A sample folder (one run) and files to upload: a good trace, an XSS-named trace, a broken file."""
    from dataclasses import replace

    from collector.model import Trace
    from collector.synthetic import synthetic_trace
    from collector.tracefile import write_trace

    root = tmp_path_factory.mktemp("traces")
    samples = root / "samples"
    samples.mkdir()
    write_trace(synthetic_trace(6000, pattern="naive", steps=6), str(samples / "naive-sample.json.gz"))
    write_trace(synthetic_trace(6000, pattern="sync-trap", steps=6), str(root / "sync-trap-upload.json.gz"))
    evil = "</script><img src=x onerror=alert(1)>"
    t = synthetic_trace(800, pattern="sync-trap", steps=3)
    iv = t.intervals.copy()
    iv["name"] = iv["name"].cat.rename_categories({iv["name"].cat.categories[0]: evil})
    write_trace(Trace(replace(t.meta, workload=evil), t.lanes, iv, t.markers), str(root / "xxx-evil.json"))
    (root / "broken.json").write_text('{"traceEvents": [')
    return {"samples": samples, "good": root / "sync-trap-upload.json.gz", "evil": root / "xxx-evil.json",
            "broken": root / "broken.json"}


@pytest.fixture(scope="module")
def server(traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    port = _free_port()
    env = {**os.environ, "STREAMSCOPE_SAMPLES_DIR": str(traces["samples"]), "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "webapp.cli", "serve", "--port", str(port), "--data", str(data)],
        cwd=data, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base + "/", proc)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def shot(request: pytest.FixtureRequest):
    """shot(page, name): save a full-page screenshot under test-output/browser/."""
    SHOTS.joinpath("browser").mkdir(parents=True, exist_ok=True)

    def _shot(page, name: str) -> None:
        page.screenshot(path=str(SHOTS / "browser" / f"{name}.png"), full_page=True)

    return _shot
