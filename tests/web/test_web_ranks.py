"""Uploading the files of several ranks as one run (POST /api/runs/merge) and the merge command."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest
from ranks.ranks_traces import MS, job

from collector.traceformat.write import write_trace
from webapp.cli import main


def _rank_files(tmp_path: Path, **kw: object) -> list[Path]:
    paths = []
    for t in job(2, **kw):  # type: ignore[arg-type]
        path = tmp_path / f"run.rank{t.ranks[0]}.json.gz"
        write_trace(t, path)
        paths.append(path)
    return paths


def _form(paths: list[Path]) -> dict[str, object]:
    return {"file": [(io.BytesIO(p.read_bytes()), p.name) for p in paths]}


def test_upload_of_rank_files_makes_one_aligned_run_with_the_straggler(client, tmp_path: Path) -> None:
    paths = _rank_files(tmp_path, slow_rank=1, delay_ns=6 * MS, offsets=[0, 9 * MS], hosts=["a", "b"])
    res = client.post("/api/runs/merge", data=_form(paths), content_type="multipart/form-data")
    assert res.status_code == 201, res.get_json()
    run = res.get_json()["run"]
    assert run["name"] == "run (2 ranks)"
    analysis = client.get(f"/api/runs/{run['id']}/analysis").get_json()
    assert analysis["ranks"]["straggler"]["rank"] == 1
    assert [f["rule"] for f in analysis["findings"]][0] == "straggler"
    offsets = {r["rank"]: r["offset_ns"] for r in analysis["ranks"]["alignment"]}
    assert abs(offsets[1] + 9 * MS) < 20_000
    lanes = client.get(f"/api/runs/{run['id']}").get_json()
    assert {ln["rank"] for ln in lanes["lanes"]} == {0, 1}


def test_upload_refuses_one_file_a_repeated_rank_and_a_bad_file(client, tmp_path: Path) -> None:
    paths = _rank_files(tmp_path)
    one = client.post("/api/runs/merge", data=_form(paths[:1]), content_type="multipart/form-data")
    assert one.status_code == 400 and "at least two ranks" in one.get_json()["error"]
    same = client.post("/api/runs/merge", data=_form([paths[0], paths[0]]), content_type="multipart/form-data")
    assert same.status_code == 400 and "rank 0 is in more than one file" in same.get_json()["error"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = client.post("/api/runs/merge", data=_form([paths[0], bad]), content_type="multipart/form-data")
    assert res.status_code == 400 and res.get_json()["error"].startswith("bad.json: ")
    assert client.get("/api/runs").get_json()["runs"] == []


def test_merge_command_writes_one_run_and_prints_the_alignment(tmp_path: Path, capsys) -> None:
    paths = _rank_files(tmp_path, offsets=[0, -3 * MS], hosts=["a", "b"])
    out = tmp_path / "run.json.gz"
    assert main(["merge", *map(str, paths), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 ranks" in text and "rank 1 (b): clock offset +299" in text
    assert main(["merge", str(paths[0]), str(tmp_path / "missing.json.gz"), "--out", str(out)]) == 2
    assert "missing.json.gz: no such file" in capsys.readouterr().err


def _app(tmp_path: Path, workers: int):
    from webapp import create_app

    data = tmp_path / f"data{workers}"
    config = {"DATA_DIR": str(data), "IMPORT_SAMPLES": False, "TESTING": True, "RECORD_ENABLED": False}
    return create_app(config | {"RANK_WORKERS": workers})


def _spy_pool(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Record how webapp.rankwork.run_per_rank is called (and let it run)."""
    import webapp.rankwork as rankwork

    calls: list[dict[str, object]] = []
    real = rankwork.run_per_rank

    def spy(func, paths, **kw):
        calls.append({"func": func.__name__, "paths": len(paths), **kw})
        return real(func, paths, **kw)

    monkeypatch.setattr(rankwork, "run_per_rank", spy)
    return calls


def test_rank_files_loaded_in_parallel_give_the_run_loaded_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collector.load import load_trace
    from collector.ranks.merge import merge_traces
    from webapp.ingest import add_trace

    paths = []
    for t in job(4, offsets=[0, 2 * MS, -MS, 4 * MS], hosts=["a", "a", "b", "b"]):
        path = tmp_path / f"run.rank{t.ranks[0]}.json.gz"
        write_trace(t, path)
        paths.append(path)
    calls = _spy_pool(monkeypatch)
    stored = {}
    for workers in (2, 1):
        app = _app(tmp_path, workers)
        res = app.test_client().post("/api/runs/merge", data=_form(paths), content_type="multipart/form-data")
        assert res.status_code == 201, res.get_json()
        store = app.extensions["streamscope.store"]
        run_id = res.get_json()["run"]["id"]
        stored[workers] = (store.load(run_id), store.analysis(run_id), res.get_json()["run"]["name"])
        assert list(store.uploads_dir.iterdir()) == []
    assert calls[0] == {"func": "load_rank", "paths": 4, "workers": 2, "start_method": "forkserver"}
    # what the serial path stored before: each file loaded in turn, merged, analysed, stored
    app = _app(tmp_path, 0)
    store = app.extensions["streamscope.store"]
    merged = merge_traces([load_trace(str(p)) for p in paths], [p.name for p in paths])
    info = add_trace(store, merged, "run (4 ranks)")
    before = (store.load(info.id), store.analysis(info.id), info.name)
    for trace, analysis, name in stored.values():
        pd.testing.assert_frame_equal(trace.intervals, before[0].intervals)
        pd.testing.assert_frame_equal(trace.markers, before[0].markers)
        assert trace.lanes == before[0].lanes and trace.meta == before[0].meta
        assert analysis == before[1] and name == before[2]
    assert {ln.rank for ln in stored[2][0].lanes} == {0, 1, 2, 3}


def test_a_bad_file_among_ranks_loaded_in_parallel_is_named_and_nothing_is_stored(tmp_path: Path) -> None:
    paths = _rank_files(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": ')
    app = _app(tmp_path, 2)
    client = app.test_client()
    res = client.post("/api/runs/merge", data=_form([paths[0], bad, paths[1]]), content_type="multipart/form-data")
    assert res.status_code == 400
    error = res.get_json()["error"]
    assert error.startswith("bad.json: ") and "\n" not in error
    assert "uploads" not in error  # the server's own file names stay on the server
    assert client.get("/api/runs").get_json()["runs"] == []
    assert list(app.extensions["streamscope.store"].uploads_dir.iterdir()) == []
