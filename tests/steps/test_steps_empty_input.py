"""A trace without intervals is refused with one line: CLI exit 2, upload 400, nothing stored."""

from __future__ import annotations

import json
import resource
import zlib
from pathlib import Path

import pytest

from collector.load import NO_EVENTS, load_trace
from collector.traceformat.spec import TraceFileError
from webapp import create_app
from webapp.cli import main


def blank_gz(path: Path, blank_mib: int) -> Path:
    """A torch.profiler-shaped .json.gz whose traceEvents holds nothing but ``blank_mib`` MiB of whitespace."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" \n" * (1 << 19)
    with open(path, "wb") as f:
        f.write(comp.compress(b'{"schemaVersion": 1, "traceEvents": ['))
        for _ in range(blank_mib):
            f.write(comp.compress(block))
        f.write(comp.compress(b"]}") + comp.flush())
    return path


def test_whitespace_gz_is_refused_without_inflating_it(tmp_path: Path) -> None:
    path = blank_gz(tmp_path / "blank.json.gz", 512)
    assert path.stat().st_size < 2 << 20
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceFileError) as info:
        load_trace(path)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert str(info.value) == f"{path}: {NO_EVENTS}"
    assert grown_kib < 128 * 1024  # 512 MiB inflated, far less held


@pytest.mark.parametrize("doc", [{"traceEvents": []}, {"traceEvents": [{"ph": "M", "name": "process_name"}]}])
def test_cli_refuses_an_empty_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    for argv in (["analyze", str(path)], ["convert", str(path), str(tmp_path / "out.json")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.strip().endswith(NO_EVENTS)
    assert not (tmp_path / "out.json").exists()


def test_upload_refuses_an_empty_trace(tmp_path: Path) -> None:
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "IMPORT_SAMPLES": False, "TESTING": True})
    client = app.test_client()
    body = blank_gz(tmp_path / "b.json.gz", 4).read_bytes()
    resp = client.post("/api/runs?name=blank.json.gz", data=body)
    assert resp.status_code == 400 and resp.get_json()["error"] == f"blank.json.gz: {NO_EVENTS}"
    assert client.get("/api/runs").get_json()["runs"] == []
    assert not any((tmp_path / "data" / "runs").glob("*"))
