"""The format registry: a file is recognised by its first bytes, never its name, and read by its importer."""

from __future__ import annotations

import gzip
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from collector.importers.registry import FORMATS, KINETO, RANK_ZIP, STREAMSCOPE, UNKNOWN, detect, is_trace_like
from collector.load import load_trace
from collector.traceformat.head import HEAD_BYTES, read_head, top_keys
from collector.traceformat.spec import TraceFileError

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "sample_traces" / "naive.json.gz"
KINETO_GZ = ROOT / "sample_traces" / "torch-profiler-overlap.pt.trace.json.gz"
KINETO_PLAIN = ROOT / "tests" / "kineto" / "data" / "gpu_fixture.json"
GOOD_X = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.0}


def _rank_zip(tmp_path: Path) -> Path:
    path = tmp_path / "job.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(OURS, "naive.json.gz")
    return path


def test_every_format_is_recognised_on_a_file_of_it(tmp_path: Path) -> None:
    """One file per registered format: a new format needs its sample here."""
    samples = {STREAMSCOPE: OURS, KINETO: KINETO_GZ, RANK_ZIP: _rank_zip(tmp_path)}
    assert set(samples) == set(FORMATS)
    for fmt, path in samples.items():
        assert detect(path) is fmt
    assert detect(KINETO_PLAIN) is KINETO


@pytest.mark.parametrize("sample", [OURS, KINETO_GZ, KINETO_PLAIN], ids=lambda p: p.name)
def test_the_name_does_not_matter(tmp_path: Path, sample: Path) -> None:
    renamed = tmp_path / "trace.bin"
    shutil.copyfile(sample, renamed)
    a, b = load_trace(sample), load_trace(renamed)
    assert a.meta.source == b.meta.source and a.lanes == b.lanes
    assert a.intervals.equals(b.intervals) and a.markers.equals(b.markers)


def test_files_of_no_format_get_one_line(tmp_path: Path) -> None:
    for name, body in [
        ("notes.json", b"hello"),
        ("a.png", b"\x89PNG\r\n\x1a\n"),
        ("b.json", b'{"x": 1}'),
        ("c", b"42"),
    ]:
        path = tmp_path / name
        path.write_bytes(body)
        with pytest.raises(TraceFileError) as info:
            load_trace(path)
        assert str(info.value) == f"{path}: {UNKNOWN}"
    assert UNKNOWN.startswith("not a trace file: Streamscope reads a Streamscope trace, a torch.profiler")
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(TraceFileError, match=r"empty\.json: the file is empty$"):
        load_trace(tmp_path / "empty.json")
    with pytest.raises(TraceFileError, match=r"nope\.json: cannot read the file"):
        load_trace(tmp_path / "nope.json")


def test_a_zip_of_ranks_is_not_one_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match="a zip of rank files, not one trace"):
        load_trace(_rank_zip(tmp_path))


def test_chrome_json_that_is_not_ours_goes_to_the_torch_profiler_importer(tmp_path: Path) -> None:
    """Any Chrome trace JSON is read as torch.profiler's (as before the registry): the array form, and an
    object whose opening keys hold ``traceEvents``; a ``streamscope`` key that holds no object is not ours."""
    for doc in ([GOOD_X], {"displayTimeUnit": "ns", "traceEvents": [GOOD_X]}, {"streamscope": 1, "traceEvents": []}):
        path = tmp_path / "t.json"
        path.write_text(json.dumps(doc))
        assert detect(path) is KINETO
    path.write_text(json.dumps({"traceEvents": [GOOD_X] * 100, "streamscope": {}}))
    assert detect(path) is STREAMSCOPE  # ours, where its object follows events that fit in the head


def test_damaged_files_keep_their_own_message(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text('{"traceEvents": [{"ph": "X", ')
    with pytest.raises(TraceFileError, match="truncated JSON"):
        load_trace(cut)
    bad = tmp_path / "bad.json.gz"
    good = gzip.compress(json.dumps({"traceEvents": [GOOD_X] * 100}).encode())
    bad.write_bytes(good[:10] + b"\xff" * 40 + good[50:])
    with pytest.raises(TraceFileError, match=r"bad\.json\.gz: gzip data does not inflate"):
        load_trace(bad)


def test_the_head_is_read_not_the_file(tmp_path: Path) -> None:
    path = tmp_path / "big.json.gz"
    events = json.dumps([GOOD_X] * 40_000)
    path.write_bytes(gzip.compress(f'{{"schemaVersion": 1, "traceEvents": {events}, "streamscope": {{}}}}'.encode()))
    head = read_head(path)
    assert head.gzip and len(head.text) == HEAD_BYTES
    assert head.keys == {"schemaVersion": "1", "traceEvents": "["}  # stops at the value the head cuts


def test_top_keys() -> None:
    assert top_keys(' \n{"a": {"b": [1, "}"]}, "c" : "x\\"y", "d": [') == {"a": "{", "c": '"', "d": "["}
    assert top_keys("[1, 2]") == {} and top_keys("") == {} and top_keys('{"a" 1}') == {}


def test_what_counts_as_a_trace_among_other_files(tmp_path: Path) -> None:
    damaged = tmp_path / "rank3.json"
    damaged.write_text('{"traceEv')
    notes = tmp_path / "README.md"
    notes.write_text("# not a trace")
    assert is_trace_like(read_head(OURS)) and is_trace_like(read_head(KINETO_PLAIN))
    assert is_trace_like(read_head(damaged))  # reported when read, not passed over
    assert not is_trace_like(read_head(notes)) and not is_trace_like(read_head(_rank_zip(tmp_path)))


def test_the_rank_files_of_a_zip_are_known_by_their_bytes(tmp_path: Path) -> None:
    from collector.ranks.rankzip import is_rank_zip, open_zip, rank_members

    path = tmp_path / "job.archive"
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(OURS, "job/rank0")
        zf.write(KINETO_GZ, "job/rank1.trace")
        zf.writestr("job/rank2.json", '{"traceEvents": [{"ph": "X", ')  # damaged: reported when read
        zf.writestr("job/README.json", "# how this job ran")
        zf.writestr("__MACOSX/job/._rank0", "resource fork")
        zf.writestr("job/nested.zip", _rank_zip(tmp_path).read_bytes())  # a zip in a zip: not one rank
    assert is_rank_zip(path) and not is_rank_zip(OURS)
    with open_zip(path) as zf:
        assert [m.filename for m in rank_members(zf, path.name)] == ["job/rank0", "job/rank1.trace", "job/rank2.json"]
