"""The run page shows set-up and tail, and few-step runs as stacked bars of where the step time went."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from loop_traces import inference_trace

from collector.steps import find_steps
from collector.traceformat.write import write_trace
from webapp import create_app
from webapp.figures import step_time_figure


def _app(tmp_path: Path):
    return create_app({"DATA_DIR": str(tmp_path / "data"), "IMPORT_SAMPLES": False, "TESTING": True})


def test_one_step_is_a_stacked_breakdown() -> None:
    row = {
        "rank": 0,
        "step": 0,
        "step_time_ns": 5_000_000,
        "cp_compute_ns": 3_000_000,
        "cp_copy_ns": 1_000_000,
        "cp_comm_ns": 0,
        "cp_host_ns": 1_000_000,
        "cp_launch_ns": 0,
        "cp_sync_ns": 0,
        "cp_other_ns": 0,
    }
    fig = step_time_figure([row])
    assert fig is not None and fig["layout"]["barmode"] == "stack"
    assert fig["layout"]["xaxis"]["type"] == "category"
    assert [t["name"] for t in fig["data"]] == ["GPU compute", "copies", "host work"]
    assert sum(t["y"][0] for t in fig["data"]) == 5.0 and fig["data"][0]["x"] == ["step 0"]
    many = step_time_figure([{**row, "step": k} for k in range(10)])
    assert many is not None and many["data"][0]["x"] == list(range(10))


def test_run_page_and_api_carry_phases_and_the_breakdown(tmp_path: Path) -> None:
    path = tmp_path / "infer.json.gz"
    write_trace(inference_trace(iterations=3), str(path))
    client = _app(tmp_path).test_client()
    resp = client.post("/api/runs?name=infer.json.gz", data=path.read_bytes())
    assert resp.status_code == 201
    url = resp.get_json()["url"]
    run_id = url.rsplit("/", 1)[-1]
    analysis = client.get(f"/api/runs/{run_id}/analysis").get_json()
    assert [p["phase"] for p in analysis["phases"]] == ["setup", "tail"]
    assert analysis["step_figure"]["layout"]["barmode"] == "stack"
    assert analysis["findings"][0]["sources"][0] == "infer.py:10"
    page = client.get(url).get_data(as_text=True)
    data = json.loads(re.search(r"window.STREAMSCOPE = (\{.*?\});\s*</script>", page, re.S).group(1))  # type: ignore[union-attr]
    assert [p["phase"] for p in data["analysis"]["phases"]] == ["setup", "tail"]


def test_upload_step_at(tmp_path: Path) -> None:
    path = tmp_path / "infer.json.gz"
    write_trace(inference_trace(iterations=5).with_meta(step_method=""), str(path))
    client = _app(tmp_path).test_client()
    resp = client.post("/api/runs?name=infer.json.gz&step_at=infer.py:9", data=path.read_bytes())
    assert resp.status_code == 201 and resp.get_json()["run"]["summary"]["steps"] == 5
    bad = client.post("/api/runs?name=infer.json.gz&step_at=nowhere.py:1", data=path.read_bytes())
    assert bad.status_code == 400 and "--step-at 'nowhere.py:1'" in bad.get_json()["error"]
    assert len(client.get("/api/runs").get_json()["runs"]) == 1
    assert find_steps(inference_trace(iterations=5)).meta.step_method == "repeat:cpu_op"


@pytest.mark.parametrize("steps, dtick", [(range(4), 1), (range(3, 150), 15), (range(0, 11), 2)])
def test_step_charts_tick_whole_steps(steps: range, dtick: int) -> None:
    from webapp.figures import compare_steps_figure, step_time_figure

    rows = [{"rank": 0, "step": s, "step_time_ns": 1e6} for s in steps]
    for fig in (step_time_figure(rows, gpu=False), compare_steps_figure(rows, rows, "a", "b")):
        assert fig is not None
        axis = fig["layout"]["xaxis"]
        assert axis["tick0"] == steps[0] and axis["dtick"] == dtick  # never a tick at -0.5 or 2.5
