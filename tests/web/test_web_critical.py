"""The critical path and host time reach the pages: /critical gives the path's stretches in a range."""

from __future__ import annotations

from pathlib import Path

from flask.testing import FlaskClient

from webapp import PACKAGE_ROOT, create_app

NAIVE = PACKAGE_ROOT / "sample_traces" / "naive.json.gz"


def _client(tmp_path: Path) -> tuple[FlaskClient, str]:
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "IMPORT_SAMPLES": False, "TESTING": True})
    client = app.test_client()
    resp = client.post("/api/runs?name=naive.json.gz", data=NAIVE.read_bytes())
    assert resp.status_code == 201
    return client, resp.get_json()["url"].rsplit("/", 1)[-1]


def test_critical_path_of_a_range_lies_on_the_runs_lanes(tmp_path: Path) -> None:
    client, run_id = _client(tmp_path)
    info = client.get(f"/api/runs/{run_id}").get_json()
    run = {**info["run"], "lanes": info["lanes"]}
    analysis = client.get(f"/api/runs/{run_id}/analysis").get_json()
    assert "critical_path" not in analysis  # served by range
    step = analysis["per_step"][10]
    a, b = step["start_ns"] - run["start_ns"], step["end_ns"] - run["start_ns"]
    got = client.get(f"/api/runs/{run_id}/critical?start_ns={a}&end_ns={b}").get_json()
    stretches = got["stretches"]
    assert stretches and not got["more"]
    lanes = {i for i, _ in enumerate(run["lanes"])}
    assert {s["lane"] for s in stretches} <= lanes
    assert {s["part"] for s in stretches} <= {"host", "launch", "compute", "copy", "comm", "sync", "other"}
    # inside the step the stretches are the step's critical path: they add up to its time
    inside = sum(min(s["s"] + s["d"], b) - max(s["s"], a) for s in stretches if s["s"] < b and s["s"] + s["d"] > a)
    assert abs(inside - (b - a)) <= 0.01 * (b - a)
    assert client.get(f"/api/runs/{run_id}/critical?start_ns=5&end_ns=1").status_code == 400
