"""The run store: catalog rows, Parquet round trip, atomic writes, orphan sweep, samples on first start."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collector.synthetic import synthetic_trace
from webapp.ingest import add_trace, display_name, import_samples
from webapp.store import RunNotFound, Store


def test_add_and_reload_round_trip(tmp_path: Path) -> None:
    trace = synthetic_trace(3000, pattern="naive", steps=5)
    store = Store(tmp_path)
    info = add_trace(store, trace, "first")
    assert len(info.id) == 16 and info.intervals == len(trace.intervals)
    assert info.lanes == 3 and info.ranks == 1
    fresh = Store(tmp_path)  # new process view: nothing cached
    back = fresh.load(info.id)
    assert back.lanes == trace.lanes
    assert back.meta == trace.meta
    want = trace.intervals.sort_values(["lane", "start_ns"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(back.intervals, want)
    pd.testing.assert_frame_equal(back.markers, trace.markers)
    assert [r.id for r in fresh.list_runs()] == [info.id]
    import sqlite3

    mode = sqlite3.connect(tmp_path / "catalog.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_rename_delete_and_unknown(tmp_path: Path) -> None:
    store = Store(tmp_path)
    info = add_trace(store, synthetic_trace(200, steps=2), "x")
    assert store.rename(info.id, "y").name == "y"
    store.delete(info.id)
    assert store.list_runs() == []
    assert not list((tmp_path / "runs").iterdir())
    for bad in (info.id, "../../etc/passwd", "zz"):
        with pytest.raises(RunNotFound):
            store.get(bad)


def test_orphan_files_are_swept(tmp_path: Path) -> None:
    store = Store(tmp_path)
    info = add_trace(store, synthetic_trace(200, steps=2), "kept")
    (tmp_path / "runs" / "0123456789abcdef.parquet").write_bytes(b"half written")
    (tmp_path / "runs" / ".tmp-aaaaaaaaaaaaaaaa.parquet").write_bytes(b"partial")
    (tmp_path / "uploads" / "feedfeedfeedfeed.json").write_bytes(b"{")
    for orphan in ("0123456789abcdef.lod", f".tmp-{info.id}.lod"):  # saved-index folders, half written
        (tmp_path / "runs" / orphan).mkdir()
        (tmp_path / "runs" / orphan / "start.npy").write_bytes(b"partial")
    Store(tmp_path)
    names = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert names == sorted(f"{info.id}.{ext}" for ext in ("parquet", "analysis.json", "overview.json", "lod"))
    assert not list((tmp_path / "uploads").iterdir())


def test_run_names_from_file_names() -> None:
    assert display_name("a/b/run.JSON.GZ") == "run"
    assert display_name("C:\\x\\my run.json.gz") == "my run"
    assert display_name("host_123.pt.trace.json.gz") == "host_123"
    assert display_name("trace.bin") == "trace.bin"


def test_samples_imported_once(tmp_path: Path) -> None:
    from collector.traceformat.write import write_trace

    samples = tmp_path / "samples"
    samples.mkdir()
    write_trace(synthetic_trace(300, steps=2), str(samples / "a.json.gz"))
    (samples / "broken.json").write_text("{not json")
    (samples / "README.md").write_text("not a trace")
    store = Store(tmp_path / "data")
    added = import_samples(store, samples)
    assert [r.name for r in added] == ["a"] and added[0].origin == "sample:a.json.gz"
    assert import_samples(store, samples) == []  # second start: nothing again
    assert len(store.list_runs()) == 1
