"""Uploading the files of several ranks as one run (POST /api/runs/merge) and the merge command."""

from __future__ import annotations

import io
from pathlib import Path

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
