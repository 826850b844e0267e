"""The web app's Record page on a real GPU: start a demo from the API, follow the job, land on the run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def test_record_demo_from_the_web_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("flask")
    from webapp import create_app

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "IMPORT_SAMPLES": False})
    client = app.test_client()
    page = client.get("/record").get_data(as_text=True)
    assert "not available" not in page
    job = client.post("/api/record", json={"demo": "naive"}).get_json()
    deadline = time.monotonic() + 240
    while job["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the recording job
        job = client.get(f"/api/record/{job['id']}").get_json()
    assert job["state"] == "done", job
    assert client.get(job["run_url"]).status_code == 200
    analysis = client.get(f"/api/runs/{job['run_id']}/analysis").get_json()
    rules = {f["rule"] for f in analysis["findings"]}
    assert {"pageable-copy", "sync-in-loop"} <= rules
    runs = client.get("/api/runs").get_json()["runs"]
    assert [r["id"] for r in runs] == [job["run_id"]]
