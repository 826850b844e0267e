"""Recordings started from the web app and the samples imported at first start load within the server's
memory budget, as uploads do: they wait in its queue, and one that could never fit is not loaded."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from collector.synthetic import synthetic_trace
from collector.traceformat.write import write_trace
from webapp import create_app
from webapp.budget import OVERHEAD_BYTES, MemoryBudget, estimate_load_bytes
from webapp.ingest import import_samples
from webapp.spool import count_events
from webapp.store import Store


class _Watched(MemoryBudget):
    """A budget that remembers what it was asked to hold."""

    def __init__(self, budget_bytes: int) -> None:
        super().__init__(budget_bytes)
        self.held: list[tuple[str, int]] = []

    def hold(self, need_bytes, ticket="", gone=lambda: False, poll_s=0.5):
        self.held.append((ticket, need_bytes))
        return super().hold(need_bytes, ticket, gone, poll_s)


def _sample(folder: Path) -> tuple[Path, int]:
    """A gzip sample in ``folder`` and its load estimate (bytes)."""
    folder.mkdir()
    path = folder / "s.json.gz"
    write_trace(synthetic_trace(3000, steps=3), str(path))
    plain = folder.parent / "plain.json"
    write_trace(synthetic_trace(3000, steps=3), str(plain))
    return path, estimate_load_bytes(plain.stat().st_size, count_events(plain))


def test_samples_take_their_share_of_the_budget(tmp_path: Path) -> None:
    path, need = _sample(tmp_path / "samples")
    budget = _Watched(4 * need)
    added = import_samples(Store(tmp_path / "data"), path.parent, budget)
    assert [r.name for r in added] == ["s"] and budget.held == [("s.json.gz", need)]
    assert path.is_file()  # a sample's own file is never removed
    # a budget the sample can never fit: skipped (with a warning), the server still starts
    app = create_app({"DATA_DIR": str(tmp_path / "small"), "SAMPLES_DIR": str(path.parent), "MAX_MEMORY": need - 1})
    assert app.extensions["streamscope.store"].list_runs() == [] and path.is_file()
    app = create_app({"DATA_DIR": str(tmp_path / "big"), "SAMPLES_DIR": str(path.parent), "MAX_MEMORY": need})
    assert [r.name for r in app.extensions["streamscope.store"].list_runs()] == ["s"]


def _recording_app(tmp_path: Path, budget_bytes: int):
    src = tmp_path / "made.json.gz"
    write_trace(synthetic_trace(3000, steps=3), str(src))
    fake = tmp_path / "fake_collector.py"
    fake.write_text(
        f"import shutil, sys\nargs = sys.argv[1:]\nshutil.copy({str(src)!r}, args[args.index('--out') + 1])\n"
    )
    config = {"DATA_DIR": str(tmp_path / "d"), "IMPORT_SAMPLES": False, "RECORD_ENABLED": True}
    return create_app({**config, "RECORD_COMMAND": [sys.executable, str(fake)], "MAX_MEMORY": budget_bytes})


def _wait(c, job: dict, until) -> dict:
    deadline = time.monotonic() + 60
    while not until(job):
        assert time.monotonic() < deadline, job
        time.sleep(0.05)  # polling the job, not waiting a fixed time
        job = c.get(f"/api/record/{job['id']}").get_json()
    return job


def test_a_recording_waits_in_the_budget_queue(tmp_path: Path) -> None:
    app = _recording_app(tmp_path, 512 * 1024**2)
    budget: MemoryBudget = app.extensions["streamscope.budget"]
    c = app.test_client()
    with budget.hold(budget.budget_bytes, "an upload"):  # the whole budget is taken
        job = c.post("/api/record", json={"demo": "naive"}).get_json()
        deadline = time.monotonic() + 60
        while not any(j["ticket"] == f"record:{job['id']}" for j in c.get("/api/ingest").get_json()["jobs"]):
            assert time.monotonic() < deadline, "the recording never joined the queue"
            time.sleep(0.05)  # polling the queue, not a fixed wait
        queue = c.get("/api/ingest").get_json()["jobs"]
        assert [j["state"] for j in queue] == ["loading", "queued"] and queue[1]["need_bytes"] > OVERHEAD_BYTES
        assert c.get(f"/api/record/{job['id']}").get_json()["state"] == "running"
    job = _wait(c, job, lambda j: j["state"] != "running")
    assert job["state"] == "done" and c.get(job["run_url"]).status_code == 200


def test_a_recording_too_large_for_the_budget_fails_with_one_line(tmp_path: Path) -> None:
    app = _recording_app(tmp_path, OVERHEAD_BYTES + 1000)
    c = app.test_client()
    job = c.post("/api/record", json={"demo": "naive"}).get_json()
    job = _wait(c, job, lambda j: j["state"] != "running")
    assert job["state"] == "failed" and "--max-memory" in job["error"] and "\n" not in job["error"]
    assert c.get("/api/runs").get_json()["runs"] == []
    assert list((tmp_path / "d" / "uploads").iterdir()) == []
    assert [p.name for p in (tmp_path / "d" / "recordings").iterdir()] == [f"naive-{job['id']}.json.gz"]  # kept
