"""Fixtures for the web tests: an app on a temporary data folder, its client, small synthetic runs."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from serving import running_server

from collector.synthetic import synthetic_trace
from webapp import create_app
from webapp.ingest import add_trace
from webapp.store import Store


@pytest.fixture
def app(tmp_path: Path):
    return create_app(
        {"DATA_DIR": str(tmp_path / "data"), "IMPORT_SAMPLES": False, "TESTING": True, "RECORD_ENABLED": False}
    )


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def store(app) -> Store:
    return app.extensions["streamscope.store"]


@pytest.fixture
def two_runs(store: Store):
    a = add_trace(store, synthetic_trace(2000, pattern="naive", steps=6), "naive run")
    b = add_trace(store, synthetic_trace(2000, pattern="overlap", steps=6), "overlap run")
    return a, b


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """``streamscope serve`` on a free port with two synthetic samples; yields (base url, process, data)."""
    from collector.traceformat.write import write_trace

    samples = tmp_path / "samples"
    samples.mkdir()
    write_trace(synthetic_trace(600, pattern="naive", steps=4), str(samples / "naive-sample.json.gz"))
    write_trace(synthetic_trace(600, pattern="overlap", steps=4), str(samples / "overlap-sample.json"))
    data = tmp_path / "data"
    with running_server(samples, data, cwd=tmp_path, stdout=subprocess.PIPE) as (base, proc):
        yield base, proc, data
