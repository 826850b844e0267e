"""`streamscope serve` as a real server in a subprocess, and its argument checks in-process."""

from __future__ import annotations

import json
import urllib.request

import pytest

from webapp.cli import main


def test_serve_lists_the_sample_runs(serve_process) -> None:
    base, _proc, data = serve_process
    with urllib.request.urlopen(base + "/", timeout=10) as resp:
        html = resp.read().decode()
    assert "naive-sample" in html and "overlap-sample" in html
    with urllib.request.urlopen(base + "/api/runs", timeout=10) as resp:
        runs = json.load(resp)["runs"]
    assert sorted(r["name"] for r in runs) == ["naive-sample", "overlap-sample"]
    assert all(r["origin"].startswith("sample:") for r in runs)
    assert (data / "catalog.sqlite").is_file()
    assert len(list((data / "runs").glob("*.parquet"))) == 2


def test_serve_refuses_public_host_without_token(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "--token" in err and "--insecure" in err and "Traceback" not in err


def test_serve_rejects_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err
