"""The saved level-of-detail index: a fresh store answers views from memory-mapped files, identical to a
freshly built index, without reading the run's Parquet file; old runs without one still work."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np
import pytest
from web_helpers import copy_trace

import webapp.analysis.lod as lod
import webapp.store as store_module
from collector.model import Trace
from collector.synthetic import synthetic_trace
from webapp import create_app
from webapp.analysis.lod import RunIndex
from webapp.ingest import add_trace
from webapp.store import Store
from webapp.timeline import interval_rows, view_payload

WINDOWS = [(0.0, 1.0), (0.2, 0.7), (0.45, 0.55), (0.5, 0.51), (0.3, 0.3003), (0.6, 0.60001)]


@pytest.fixture(autouse=True)
def small_raw_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long lanes (and their prefix arrays) from a few thousand intervals, so both paths are saved."""
    monkeypatch.setattr(lod, "RAW_LIMIT", 1500)


def run_trace() -> Trace:
    return synthetic_trace(12_000, pattern="naive", steps=8)  # copies (exposed windows), steps, 2+ lanes


def payloads(index: RunIndex) -> list[bytes]:
    span = index.end_ns - index.origin_ns
    out = []
    for a, b in WINDOWS:
        t0, t1 = index.origin_ns + int(span * a), index.origin_ns + max(1, int(span * b))
        for width, rank in ((1200, None), (300, 0)):
            out.append(msgspec.json.encode(view_payload(index, t0, t1, width, rank=rank)))
    return out


@pytest.mark.parametrize("make", [run_trace, lambda: copy_trace(6000)], ids=["loop", "many-copies"])
def test_saved_index_gives_the_same_views(tmp_path: Path, make: Callable[[], Trace]) -> None:
    store = Store(tmp_path)
    info = add_trace(store, make(), "run")
    built = store.index(info.id)
    assert any(c is not None for c in built.coarse)  # the prefix-sum path is saved too
    saved = Store(tmp_path).index(info.id)
    assert isinstance(saved.start.base, np.memmap) and isinstance(saved.columns.name.base, np.memmap)
    assert isinstance(saved.level.first.base, np.memmap) and saved.level.p0_ns == built.level.p0_ns
    assert saved.lanes == built.lanes and saved.meta == built.meta
    assert payloads(saved) == payloads(built)
    fresh = RunIndex(store_module.read_run_file(store.run_path(info.id)))
    assert payloads(saved) == payloads(fresh)
    # the full run is still there when asked for (read lazily), in the index's row order
    assert saved.frame["start_ns"].tolist() == np.asarray(saved.start).tolist()


def test_fresh_app_answers_views_without_reading_the_parquet_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_trace(Store(tmp_path), run_trace(), "run")
    run_id = Store(tmp_path).list_runs()[0].id

    def no_read(path: Path) -> Trace:
        raise AssertionError(f"read the run file {path.name}")

    monkeypatch.setattr(store_module, "read_run_file", no_read)
    app = create_app({"DATA_DIR": str(tmp_path), "IMPORT_SAMPLES": False, "TESTING": True, "RECORD_ENABLED": False})
    client = app.test_client()
    run = client.get(f"/api/runs/{run_id}")
    assert run.status_code == 200 and len(run.get_json()["lanes"]) >= 2
    for start, end in ((0, None), (1000, 2_000_000)):
        query = f"start_ns={start}&width_px=900" + (f"&end_ns={end}" if end else "")
        resp = client.get(f"/api/runs/{run_id}/timeline?{query}")
        assert resp.status_code == 200
        assert sum(len(ln["s"]) + len(ln["bs"]) for ln in resp.get_json()["lanes"]) > 0
    # interval rows: only the row groups of the run file that hold them are read
    lanes = client.get(f"/api/runs/{run_id}/timeline?width_px=900").get_json()["lanes"]
    ids = sorted({*lanes[0]["id"][:3], *lanes[1]["id"][-2:], 10**12})  # an unknown id is skipped
    rows = client.get(f"/api/runs/{run_id}/intervals?ids={','.join(map(str, ids))}").get_json()["intervals"]
    assert sorted(r["id"] for r in rows) == ids[:-1]
    monkeypatch.undo()
    full = RunIndex(store_module.read_run_file(Store(tmp_path).run_path(run_id)))
    assert rows == interval_rows(full, ids)


def test_delete_removes_the_saved_index(tmp_path: Path) -> None:
    store = Store(tmp_path)
    info = add_trace(store, run_trace(), "run")
    assert (store.lod_path(info.id) / "index.json").is_file()
    store.delete(info.id)
    assert not store.lod_path(info.id).exists()
    assert not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("damage", ["missing", "truncated", "other version"])
def test_run_without_a_usable_saved_index_is_rebuilt_from_its_run_file(tmp_path: Path, damage: str) -> None:
    store = Store(tmp_path)
    info = add_trace(store, run_trace(), "run")
    expected = payloads(store.index(info.id))
    folder = store.lod_path(info.id)
    if damage == "missing":  # stored before saved indexes existed
        shutil.rmtree(folder)
    elif damage == "truncated":
        (folder / "end.npy").write_bytes((folder / "end.npy").read_bytes()[:200])
    else:
        (folder / "index.json").write_text('{"version": 999}')
    store = Store(tmp_path)
    index = store.index(info.id)
    assert not isinstance(index.start.base, np.memmap)
    assert payloads(index) == expected
    # the index is saved again in the background: the next fresh store maps it
    for thread in threading.enumerate():
        if thread.name == f"save-index-{info.id}":
            thread.join()
    again = Store(tmp_path).index(info.id)
    assert isinstance(again.start.base, np.memmap)
    assert payloads(again) == expected


def test_index_saved_before_levels_builds_its_level_on_use(tmp_path: Path) -> None:
    store = Store(tmp_path)
    info = add_trace(store, run_trace(), "run")
    expected = payloads(store.index(info.id))
    folder = store.lod_path(info.id)
    doc = json.loads((folder / "index.json").read_text())
    del doc["level_p0_ns"]
    (folder / "index.json").write_text(json.dumps(doc))
    for path in folder.glob("level-*.npy"):
        path.unlink()
    index = Store(tmp_path).index(info.id)
    assert isinstance(index.start.base, np.memmap)  # the saved index, not a rebuild from the run file
    assert payloads(index) == expected
    assert len(index.level.first) > 0


def test_read_run_rows_reads_rows_across_row_groups(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "rows.parquet"
    pq.write_table(
        pa.table({"id": np.arange(1000) * 3, "name": pa.array(["a", "b"] * 500).dictionary_encode()}),
        path,
        row_group_size=128,
    )
    positions = np.array([0, 5, 127, 128, 640, 999])
    frame = store_module.read_run_rows(path, positions)
    assert frame["id"].tolist() == (positions * 3).tolist()
    assert frame["name"].astype(str).tolist() == ["a", "b", "b", "a", "a", "b"]
    assert len(store_module.read_run_rows(path, np.zeros(0, np.int64))) == 0
