"""`streamscope serve` as a real server in a subprocess, and its argument checks in-process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request

import pytest
from serving import REPO

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


def test_serve_on_a_port_in_use_says_to_pick_another_with_port(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "webapp.cli", "serve", "--port", str(port), "--no-samples", "--data", str(tmp_path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2
    err = done.stderr.strip()
    assert err.startswith(f"streamscope serve: error: cannot listen on 127.0.0.1:{port}: "), err
    assert "--port" in err and "\n" not in err and "Traceback" not in err


def _upload(base: str, path, name: str) -> int:
    req = urllib.request.Request(
        f"{base}/api/runs?name={name}",
        data=path.read_bytes(),
        method="POST",
        headers={"Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return int(resp.status)


def test_concurrent_uploads_all_land(serve_process, tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from collector.synthetic import synthetic_trace
    from collector.traceformat.write import write_trace

    base, _proc, _data = serve_process
    files = []
    for i in range(4):
        files.append(tmp_path / f"c{i}.json.gz")
        write_trace(synthetic_trace(500, steps=2, seed=i), str(files[-1]))
    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(lambda f: _upload(base, f, f.name), files))
    assert codes == [201] * 4
    with urllib.request.urlopen(base + "/api/runs", timeout=10) as resp:
        names = {r["name"] for r in json.load(resp)["runs"]}
    assert {"c0", "c1", "c2", "c3"} <= names


def test_server_killed_mid_upload_leaves_no_half_run(serve_process) -> None:
    import http.client

    from webapp.store import Store

    base, proc, data = serve_process
    before = len(Store(data).list_runs())
    host, port = base.rsplit("/", 1)[-1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.putrequest("POST", "/api/runs?name=big.json")
    conn.putheader("Content-Type", "application/octet-stream")
    conn.putheader("Content-Length", str(50_000_000))
    conn.endheaders()
    conn.send(b'{"traceEvents": [' + b" " * 2_000_000)  # part of the body, then the server dies
    proc.kill()
    proc.wait(timeout=10)
    conn.close()
    store = Store(data)  # what the next start sees
    assert len(store.list_runs()) == before
    assert not list(store.uploads_dir.iterdir())
    assert not [p for p in store.runs_dir.iterdir() if p.name.startswith(".tmp-")]
