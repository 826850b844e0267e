"""Browser tests: Debian's Chromium driven by Playwright against a real `streamscope serve` subprocess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import REPO, running_server

SHOTS = REPO / "test-output"
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    if not Path(CHROMIUM).exists():
        pytest.skip("browser tests need Debian's chromium at /usr/bin/chromium")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    return {**browser_context_args, "viewport": {"width": 1440, "height": 960}}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A sample folder (one run) and files to upload: a good trace, an XSS-named trace, a broken file."""
    from dataclasses import replace

    from collector.model import Trace
    from collector.synthetic import synthetic_trace
    from collector.traceformat.write import write_trace

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
    return {
        "samples": samples,
        "good": root / "sync-trap-upload.json.gz",
        "evil": root / "xxx-evil.json",
        "broken": root / "broken.json",
    }


@pytest.fixture(scope="module")
def server(traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("data")
    with running_server(traces["samples"], data, cwd=data) as (base, _proc):
        yield base


@pytest.fixture
def shot(request: pytest.FixtureRequest):
    """shot(page, name): save a full-page screenshot under test-output/browser/."""
    SHOTS.joinpath("browser").mkdir(parents=True, exist_ok=True)

    def _shot(page, name: str) -> None:
        page.screenshot(path=str(SHOTS / "browser" / f"{name}.png"), full_page=True)

    return _shot
