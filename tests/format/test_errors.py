"""Every bad file gets its own one-line TraceFileError, on the msgspec path and the stdlib path alike."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from collector.load import load_trace
from collector.model import Trace
from collector.traceformat.events import read_events
from collector.traceformat.read import read_trace
from collector.traceformat.spec import TraceFileError
from collector.traceformat.write import write_trace

PATHS = [pytest.param(True, id="msgspec"), pytest.param(False, id="stdlib")]

GOOD_X = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2.0}


def write_events(path: Path, events: list[Any]) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def expect(path: Path, fast: bool, pattern: str, **kw: Any) -> str:
    with pytest.raises(TraceFileError, match=pattern) as info:
        read_events(path, fast=fast, **kw)
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(path))
    return text


@pytest.mark.parametrize("fast", PATHS)
@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        (b"", "the file is empty"),
        (b"this is not json", r"not valid JSON"),
        (b'{"traceEvents": [{"ph": "X"}, ', "truncated JSON"),
        (b'{"traceEvents": [{"ph": "X", "ts": 1.0, "dur": 2.0}]', "truncated JSON"),
        (b"42", "not a trace"),
        (b'{"schemaVersion": 1}', "no 'traceEvents'"),
        (b'{"traceEvents": {"ph": "X"}}', "'traceEvents' is not an array"),
    ],
)
def test_not_a_trace(tmp_path: Path, fast: bool, body: bytes, pattern: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(body)
    expect(path, fast, pattern)


@pytest.mark.parametrize("fast", PATHS)
@pytest.mark.parametrize(
    ("bad_event", "pattern"),
    [
        ({"cat": "kernel", "name": "k", "ts": 1.0, "dur": 1.0}, r"event 2: missing 'ph'"),
        ({k: v for k, v in GOOD_X.items() if k != "ts"}, r"event 2: 'X' event is missing 'ts'"),
        ({**GOOD_X, "ts": None}, r"event 2: 'ts' is not a number \(got null\)"),
        ({k: v for k, v in GOOD_X.items() if k != "dur"}, r"event 2: 'X' event is missing 'dur'"),
        ({**GOOD_X, "dur": -3.0}, r"event 2: negative duration \(-3 us\)"),
        ({**GOOD_X, "ts": "soon"}, r"event 2: 'ts' is not a number \(got \"soon\"\)"),
        ({**GOOD_X, "dur": [1]}, r"event 2: 'dur' is not a number"),
        ({**GOOD_X, "ts": 1e300}, r"event 2: 'ts' is out of range"),
        ([1, 2], r"event 2: not a JSON object"),
        ({**GOOD_X, "args": 5}, r"event 2: 'args' should be an object"),
        ({**GOOD_X, "args": {"stream": "seven"}}, r"event 2: 'args.stream' should be an integer"),
        ({**GOOD_X, "name": 12}, r"event 2: 'name' should be a string"),
    ],
)
def test_bad_event_names_problem_and_index(tmp_path: Path, fast: bool, bad_event: Any, pattern: str) -> None:
    path = write_events(tmp_path / "bad.json", [GOOD_X, GOOD_X, bad_event, GOOD_X])
    expect(path, fast, pattern)


def test_both_paths_give_the_same_message(tmp_path: Path) -> None:
    path = write_events(tmp_path / "bad.json", [GOOD_X] * 5 + [{**GOOD_X, "args": {"bytes": 1.5}}])
    assert expect(path, True, "event 5") == expect(path, False, "event 5")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match="cannot read the file"):
        read_events(tmp_path / "nope.json")


@pytest.mark.parametrize("fast", PATHS)
def test_gzip_that_does_not_inflate(tmp_path: Path, fast: bool) -> None:
    path = tmp_path / "bad.json.gz"
    good = gzip.compress(json.dumps({"traceEvents": [GOOD_X] * 100}).encode())
    path.write_bytes(good[:10] + b"\xff" * 40 + good[50:])
    expect(path, fast, "gzip data does not inflate")


@pytest.mark.parametrize("fast", PATHS)
def test_truncated_gzip(tmp_path: Path, fast: bool) -> None:
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": [GOOD_X] * 1000}).encode())[:-30])
    expect(path, fast, "gzip data ends early")


def test_gzip_bomb_is_refused_without_inflating(tmp_path: Path) -> None:
    """64 MB of spaces in a ~64 KB gzip: refused at the limit, the rest never inflated."""
    import resource

    path = tmp_path / "bomb.json.gz"
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    with open(path, "wb") as f:
        f.write(comp.compress(b'{"traceEvents": ['))
        for _ in range(64):
            f.write(comp.compress(block))
        f.write(comp.compress(b"]}") + comp.flush())
    assert path.stat().st_size < 1_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text = expect(path, True, "refusing a likely gzip bomb", max_inflated_bytes=8 * 1024**2)
    assert "8,388,608 bytes" in text
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 40_000  # never inflated the 64 MB
    assert len(read_events(path, max_inflated_bytes=100 * 1024**2).events) == 0  # a high limit reads it


def test_multi_member_gzip_reads(tmp_path: Path) -> None:
    path = tmp_path / "two.json.gz"
    text = json.dumps({"traceEvents": [GOOD_X] * 3}).encode()
    path.write_bytes(gzip.compress(text[:20]) + gzip.compress(text[20:]))
    assert len(read_events(path).events) == 3


# ----------------------------------------------------------------------------------- our format


def edit_file(src: Path, dst: Path, change: Any) -> Path:
    doc = json.loads(src.read_text())
    change(doc)
    dst.write_text(json.dumps(doc))
    return dst


@pytest.fixture
def good_file(tmp_path: Path, trace: Trace) -> Path:
    path = tmp_path / "good.json"
    write_trace(trace, path)
    return path


def _first_x(doc: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in doc["traceEvents"] if e["ph"] == "X" and e["args"]["kind"] not in ("step", "mark"))


def _x_index(doc: dict[str, Any]) -> int:
    return next(i for i, e in enumerate(doc["traceEvents"]) if e is _first_x(doc))


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        (
            lambda d: d["streamscope"].update(format_version=99),
            r"format version 99 is not supported \(this streamscope reads version 1\)",
        ),
        (lambda d: d["streamscope"].pop("format_version"), r"format version None is not supported"),
        (lambda d: d["streamscope"].update(lanes="x"), r"'streamscope.lanes' is missing or not an array"),
        (lambda d: d["streamscope"]["lanes"][1].update(kind="gpu"), r"'streamscope.lanes\[1\]' is not a valid lane"),
        (lambda d: d.update(baseTimeNanoseconds=1.5), r"'baseTimeNanoseconds' is not an integer"),
        (lambda d: _first_x(d)["args"].update(kind="teleport"), r"event \d+: unknown args.kind 'teleport'"),
        (lambda d: _first_x(d)["args"].pop("kind"), r"event \d+: missing args.kind"),
        (lambda d: _first_x(d)["args"].update(memory_kind="fast"), r"event \d+: unknown args.memory_kind 'fast'"),
        (lambda d: _first_x(d).update(tid=99), r"event \d+: tid 99 is not a lane of this trace"),
        (lambda d: _first_x(d).update(pid=5), r"event \d+: pid does not match the rank of lane"),
        (lambda d: _first_x(d).update(dur=-1.0), r"event \d+: negative duration"),
    ],
)
def test_bad_streamscope_file(tmp_path: Path, good_file: Path, change: Any, pattern: str) -> None:
    path = edit_file(good_file, tmp_path / "bad.json", change)
    with pytest.raises(TraceFileError, match=pattern) as info:
        read_trace(path)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(TraceFileError, match=pattern):
        load_trace(path)


def test_event_index_is_the_file_index(tmp_path: Path, good_file: Path) -> None:
    doc = json.loads(good_file.read_text())
    index = _x_index(doc)
    path = edit_file(good_file, tmp_path / "bad.json", lambda d: _first_x(d).update(ts="later"))
    with pytest.raises(TraceFileError, match=rf"event {index}: 'ts' is not a number"):
        read_trace(path)


def test_read_trace_refuses_foreign_trace(tmp_path: Path) -> None:
    path = write_events(tmp_path / "kineto.json", [GOOD_X])
    with pytest.raises(TraceFileError, match="not a Streamscope trace"):
        read_trace(path)
