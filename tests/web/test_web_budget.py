"""The ingest memory budget: estimates, first-come queueing, refusal of what could never fit."""

from __future__ import annotations

import gzip
import threading
import time
from pathlib import Path

import pytest

from collector.synthetic import synthetic_trace
from collector.traceformat.write import write_trace
from webapp import create_app
from webapp.budget import Cancelled, MemoryBudget, estimate_load_bytes


def _wait(predicate, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)  # polling, not a fixed wait


def test_queue_admits_in_arrival_order_within_the_budget() -> None:
    budget = MemoryBudget(100)
    order: list[str] = []
    first = budget.hold(60, "a")
    first.__enter__()

    def job(name: str, need: int) -> None:
        with budget.hold(need, name):
            order.append(name)

    threads = [threading.Thread(target=job, args=(n, need)) for n, need in (("b", 50), ("c", 10))]
    threads[0].start()
    _wait(lambda: [j.ticket for j in budget.jobs()] == ["a", "b"])
    threads[1].start()
    _wait(lambda: len(budget.jobs()) == 3)
    # c (10) would fit beside a (60) but waits behind b: first come, first served
    assert [(j.ticket, j.state) for j in budget.jobs()] == [("a", "loading"), ("b", "queued"), ("c", "queued")]
    assert budget.in_use_bytes == 60
    first.__exit__(None, None, None)
    for t in threads:
        t.join(10)
    assert order == ["b", "c"] and budget.jobs() == [] and budget.in_use_bytes == 0


def test_a_waiting_job_whose_client_left_is_cancelled() -> None:
    budget = MemoryBudget(10)
    with budget.hold(10, "running"), pytest.raises(Cancelled), budget.hold(5, "leaver", lambda: True, 0.01):
        pass
    assert budget.jobs() == []
    with pytest.raises(ValueError), budget.hold(11):
        pass


def test_estimate_grows_with_size_and_events() -> None:
    assert estimate_load_bytes(1000, 10) < estimate_load_bytes(2000, 10) < estimate_load_bytes(2000, 1000)


@pytest.fixture
def small_budget_app(tmp_path: Path):
    return create_app(
        {"DATA_DIR": str(tmp_path / "d"), "IMPORT_SAMPLES": False, "TESTING": True, "MAX_MEMORY": 200 * 1024**2}
    )


def test_upload_waits_queued_for_the_budget_then_is_stored(small_budget_app, tmp_path: Path) -> None:
    app = small_budget_app
    client = app.test_client()
    path = tmp_path / "q.json.gz"
    write_trace(synthetic_trace(2000, pattern="naive", steps=4), str(path))
    budget: MemoryBudget = app.extensions["streamscope.budget"]
    result: dict = {}
    blocker = budget.hold(budget.budget_bytes, "other upload")
    blocker.__enter__()
    thread = threading.Thread(
        target=lambda: result.update(
            resp=app.test_client().post("/api/runs?name=q.json.gz&ticket=t1", data=path.read_bytes())
        )
    )
    thread.start()

    def queued() -> bool:
        jobs = client.get("/api/ingest").get_json()["jobs"]
        return {"ticket": "t1", "state": "queued"} in [{k: j[k] for k in ("ticket", "state")} for j in jobs]

    _wait(queued)
    assert app.extensions["streamscope.store"].list_runs() == []
    blocker.__exit__(None, None, None)
    thread.join(60)
    assert result["resp"].status_code == 201
    assert client.get("/api/ingest").get_json()["jobs"] == []


def test_trace_over_the_budget_is_refused_with_one_line(small_budget_app) -> None:
    client = small_budget_app.test_client()
    # 300 MB of whitespace in a gzip: inflated to disk up to what the budget could load, then refused
    bomb = gzip.compress(b'{"traceEvents": [' + b" " * (300 << 20) + b"]}", 1)
    resp = client.post("/api/runs?name=big.json.gz", data=bomb)
    body = resp.get_json()
    assert resp.status_code == 413 and body["status"] == 413
    assert body["error"].startswith("big.json.gz: the gzip inflates past") and "\n" not in body["error"]
    store = small_budget_app.extensions["streamscope.store"]
    assert store.list_runs() == [] and list(store.uploads_dir.iterdir()) == []


def test_many_events_over_the_budget_are_refused_from_the_count(tmp_path: Path) -> None:
    app = create_app({"DATA_DIR": str(tmp_path / "d"), "IMPORT_SAMPLES": False, "MAX_MEMORY": 70 * 1024**2})
    events = b",".join([b'{"ph":"i","ts":1}'] * 40_000)
    resp = app.test_client().post("/api/runs?name=many.json", data=b'{"traceEvents":[' + events + b"]}")
    assert resp.status_code == 413
    assert "40,000 events" in resp.get_json()["error"] and "--max-memory" in resp.get_json()["error"]
