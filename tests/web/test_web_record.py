"""The Record page never loses a recording: it checks its folder first, follows a fallback path the recorder
printed, stores a failed script's trace with its error, and keeps a trace it cannot store."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collector.synthetic import synthetic_trace
from collector.traceformat.save import SAVED_LINE
from collector.traceformat.write import write_trace
from webapp import create_app


def _app(tmp_path: Path, fake_body: str) -> Any:
    """An app whose recorder is a fake ``python -m collector`` running ``fake_body`` (``out``: its --out)."""
    src = tmp_path / "made.json.gz"
    write_trace(synthetic_trace(300, steps=2), str(src))
    fake = tmp_path / "fake_collector.py"
    fake.write_text(
        "import os, shutil, sys\n"
        "args = sys.argv[1:]\n"
        "out = args[args.index('--out') + 1]\n"
        f"src = {str(src)!r}\n" + fake_body
    )
    config = {
        "DATA_DIR": str(tmp_path / "d"),
        "IMPORT_SAMPLES": False,
        "RECORD_ENABLED": True,
        "RECORD_COMMAND": [sys.executable, str(fake)],
    }
    return create_app(config)


def _finish(client: Any, job: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while job["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the job, not waiting a fixed time
        job = client.get(f"/api/record/{job['id']}").get_json()
    return job


def test_record_runs_the_collector_and_lands_on_the_run(tmp_path: Path) -> None:
    """With recording forced on, a fake `python -m collector` writes a trace that becomes a run."""
    client = _app(tmp_path, "print('recording', args[-1], flush=True)\nshutil.copy(src, out)\n").test_client()
    assert "Record" in client.get("/record").get_data(as_text=True)
    assert client.post("/api/record", json={"demo": "nope"}).status_code == 400
    assert client.post("/api/record", json={"script": "/no/such/file.py"}).status_code == 400
    job = _finish(client, client.post("/api/record", json={"demo": "naive"}).get_json())
    assert job["state"] == "done", job
    assert job["log"] == ["recording demo:naive"]
    assert client.get(job["run_url"]).status_code == 200
    assert client.get("/api/record/nope").status_code == 404


def test_a_fallback_path_the_recorder_printed_becomes_the_run(tmp_path: Path) -> None:
    spare = tmp_path / "spare" / "rec.json.gz"
    line = SAVED_LINE.format(out="OUT", reason="No space left on device", path=spare)
    body = (
        f"os.makedirs({str(spare.parent)!r})\nshutil.copy(src, {str(spare)!r})\n"
        f"print({line!r}.replace('OUT', out), file=sys.stderr, flush=True)\n"
    )
    client = _app(tmp_path, body).test_client()
    job = _finish(client, client.post("/api/record", json={"demo": "naive"}).get_json())
    assert job["state"] == "done", job
    run = client.get(job["run_url"].replace("/runs/", "/api/runs/")).get_json()["run"]
    assert run["name"] == "naive"
    assert not spare.exists()  # stored, so the spare copy is gone


def test_a_failed_script_still_stores_its_trace_named_after_the_file(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit(3)\n")
    body = "shutil.copy(src, out)\nprint('KeyError: boom', flush=True)\nsys.exit(1)\n"
    client = _app(tmp_path, body).test_client()
    job = _finish(client, client.post("/api/record", json={"script": f"{script} --lr 3"}).get_json())
    assert job["state"] == "done" and job["error"] == "KeyError: boom", job
    run = client.get(job["run_url"].replace("/runs/", "/api/runs/")).get_json()["run"]
    assert run["name"] == "train.py"  # not the absolute path and the arguments


def test_a_trace_that_cannot_be_stored_is_kept_and_named(tmp_path: Path) -> None:
    body = "open(out, 'w').write('{\"traceEvents\": [')\n"  # a broken file: the store refuses it
    client = _app(tmp_path, body).test_client()
    job = _finish(client, client.post("/api/record", json={"demo": "naive"}).get_json())
    assert job["state"] == "failed"
    kept = Path(job["error"].rsplit("the recording is kept at ", 1)[-1])
    assert kept.exists() and kept.parent == tmp_path / "d" / "recordings"  # not in uploads/, swept at start
    assert kept.name == f"naive-{job['id']}.json.gz"


def test_an_unwritable_uploads_folder_refuses_before_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from webapp import record

    ran = tmp_path / "ran"
    app = _app(tmp_path, f"open({str(ran)!r}, 'w').write('x')\n")
    client = app.test_client()
    client.get("/")  # the store and its folders exist

    def refuse(path: str) -> None:
        raise record.OutPathError(f"cannot write --out {path}: not writable (Permission denied); nothing was run")

    monkeypatch.setattr(record, "prepare_out", refuse)
    resp = client.post("/api/record", json={"demo": "naive"})
    assert resp.status_code == 503
    assert "cannot store a recording now" in resp.get_json()["error"]
    assert not ran.exists()
