"""POST /api/runs/merge with one .zip holding the rank files."""

from __future__ import annotations

import io
import zipfile

from ranks.ranks_traces import MS, job

from collector.traceformat.write import write_trace


def _zip_of(traces: list, extra: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for t in traces:
            zf.writestr(f"ranks/run.rank{t.ranks[0]}.json", _trace_bytes(t))
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return buf.getvalue()


def _trace_bytes(t) -> bytes:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.json"
        write_trace(t, p)
        return p.read_bytes()


def _post(client, data: bytes, name: str = "job.zip"):
    form = {"file": [(io.BytesIO(data), name)]}
    return client.post("/api/runs/merge", data=form, content_type="multipart/form-data")


def test_a_zip_of_rank_files_makes_one_run(client) -> None:
    traces = job(2, slow_rank=1, delay_ns=6 * MS, offsets=[0, 9 * MS], hosts=["a", "b"])
    res = _post(client, _zip_of(traces, {"ranks/notes.txt": b"skipped"}))
    assert res.status_code == 201, res.get_json()
    run = res.get_json()["run"]
    assert run["name"] == "run (2 ranks)"
    analysis = client.get(f"/api/runs/{run['id']}/analysis").get_json()
    assert analysis["ranks"]["straggler"]["rank"] == 1


def test_bad_zips_are_refused_with_one_line(client) -> None:
    res = _post(client, b"PK\x03\x04 broken")
    assert res.status_code == 400 and "not a readable zip" in res.get_json()["error"]
    res = _post(client, _zip_of([], {"a.txt": b"x"}))
    assert res.status_code == 400 and "holds no rank files" in res.get_json()["error"]
    res = _post(client, _zip_of(job(2)[:1]))
    assert res.status_code == 400 and "at least two ranks" in res.get_json()["error"]
    assert client.get("/api/runs").get_json()["runs"] == []
