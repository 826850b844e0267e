"""Upload files on disk: gzip inflated to disk within a limit, events counted, several gzip members."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from collector.traceformat.events import read_bytes
from collector.traceformat.spec import TraceFileError
from webapp import spool


def _members(tmp_path: Path) -> tuple[Path, bytes]:
    """Two gzip members; the first inflates past the readers' output cap per call (16 MiB), so it ends
    while output is capped and the second member starts in the unconsumed input."""
    first = b'{"traceEvents": [' + b" " * (20 << 20)
    second = b'{"ph": "X"}, {"ph": "X"}]}'
    path = tmp_path / "two.json.gz"
    path.write_bytes(gzip.compress(first, 1) + gzip.compress(second) + b"\0" * 8)
    return path, first + second


def test_inflate_reads_every_member_and_counts_events(tmp_path: Path) -> None:
    src, plain = _members(tmp_path)
    size, events = spool.inflate_to_disk(src, tmp_path / "out.json", limit_bytes=1 << 30)
    assert (size, events) == (len(plain), 2)
    assert (tmp_path / "out.json").read_bytes() == plain


def test_collector_reader_reads_every_member(tmp_path: Path) -> None:
    """Same JSON as the plain file (the reader may drop runs of blank padding, never content)."""
    src, plain = _members(tmp_path)
    assert json.loads(bytes(read_bytes(str(src), 1 << 30))) == json.loads(plain)


def test_inflate_stops_at_the_limit(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.json.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    member = packer.compress(b" " * (32 << 20)) + packer.flush()
    bomb.write_bytes(member * 64)  # 2 GiB inflated
    with pytest.raises(spool.InflateLimit):
        spool.inflate_to_disk(bomb, tmp_path / "out.json", limit_bytes=48 << 20)
    assert (tmp_path / "out.json").stat().st_size <= 48 << 20
    with pytest.raises(TraceFileError, match="bomb"):
        read_bytes(str(bomb), 48 << 20)


def test_corrupt_and_truncated_gzip_are_value_errors(tmp_path: Path) -> None:
    data = gzip.compress(b'{"traceEvents": []}' * 1000)
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated"):
        spool.inflate_to_disk(tmp_path / "cut.gz", tmp_path / "o", 1 << 20)
    (tmp_path / "bad.gz").write_bytes(data[:10] + b"\xff" * 40)
    with pytest.raises(ValueError, match="corrupt"):
        spool.inflate_to_disk(tmp_path / "bad.gz", tmp_path / "o", 1 << 20)


def test_event_count_spans_chunk_boundaries(tmp_path: Path) -> None:
    body = b"x" * (spool.CHUNK_BYTES - 2) + b'"ph"' + b' "ph" ' * 3
    (tmp_path / "t.json").write_bytes(body)
    assert spool.count_events(tmp_path / "t.json") == 4
