"""The two interval formatters (pyarrow compute in threads, Python string formatting) write the same bytes,
in one chunk or many, plain or as one gzip member."""

from __future__ import annotations

import gzip
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from format.test_roundtrip import assert_same

from collector.model import Trace
from collector.synthetic import synthetic_trace
from collector.traceformat import write as w
from collector.traceformat.read import read_trace

pytest.importorskip("pyarrow")


def _events(trace: Trace, arrow: bool) -> bytes:
    iv = trace.intervals
    base = int(iv["start_ns"].min())
    gpu_lane = np.array([ln.kind.is_gpu for ln in trace.lanes], dtype=bool)
    if arrow:
        from collector.traceformat.write_arrow import interval_text

        return bytes(interval_text(iv, base, gpu_lane)(0, len(iv)))
    return "".join(e + ",\n" for e in w._interval_events(iv, base, gpu_lane)).encode()


def test_both_formatters_write_the_same_events(trace: Trace) -> None:
    """Every kind on host and GPU lanes, quotes, backslashes and non-ASCII text, optional args on and off."""
    assert _events(trace, arrow=True) == _events(trace, arrow=False)
    big = synthetic_trace(5_000, steps=3)
    assert _events(big, arrow=True) == _events(big, arrow=False)


def test_both_formatters_agree_when_a_lane_mixes_streams_and_ranks(trace: Trace) -> None:
    """The pyarrow formatter writes a lane's rank and stream once per lane; rows that disagree with their
    lane's first row (a malformed or merged trace) are written as they are, as the Python formatter does."""
    iv = trace.intervals.copy()
    iv.loc[iv.index[::3], "stream"] = 99
    iv.loc[iv.index[1::5], "rank"] = 3
    mixed = Trace(trace.meta, trace.lanes, iv, trace.markers)
    assert _events(mixed, arrow=True) == _events(mixed, arrow=False)
    assert b'"stream":99' in _events(mixed, arrow=True) and b'"pid":3' in _events(mixed, arrow=True)


@pytest.mark.parametrize("arrow", [True, False], ids=["pyarrow", "no-pyarrow"])
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_many_chunks_in_threads_make_the_file_one_chunk_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str, arrow: bool
) -> None:
    trace = synthetic_trace(3_000, steps=3)
    write_trace = w.write_trace
    write_trace(trace, tmp_path / f"one{suffix}")
    if not arrow:  # as without pyarrow installed: the import fails, Python formats the rows
        monkeypatch.setitem(sys.modules, "collector.traceformat.write_arrow", None)
    monkeypatch.setattr(w, "_CHUNK", 7)  # 400+ chunks, more than the threads keep in flight
    write_trace(trace, tmp_path / f"many{suffix}")
    one, many = (tmp_path / f"one{suffix}").read_bytes(), (tmp_path / f"many{suffix}").read_bytes()
    if suffix.endswith(".gz"):
        assert gzip.decompress(one) == gzip.decompress(many)
        # a single gzip member: zlib reads it to its end with nothing left over
        d = zlib.decompressobj(wbits=31)
        d.decompress(many)
        assert d.eof and not d.unused_data
    else:
        assert one == many
    assert_same(read_trace(tmp_path / f"many{suffix}"), trace)


@pytest.mark.parametrize(
    ("rows", "threads", "each"),
    [(25_600, 16, 4_000), (25_600, 2, 12_800), (1_000_000, 16, 25_000), (300, 16, 4_000), (9_000, 1, 9_000)],
)
def test_a_short_recordings_rows_are_shared_among_the_threads(rows: int, threads: int, each: int) -> None:
    """A few tens of thousands of rows (a short script's stop waits for them) go to several threads, not all
    to one; long recordings keep chunks of at most 25,000 rows."""
    assert w._chunk_rows(rows, threads) == each


@pytest.mark.parametrize("sizes", [(0, 0), (0, 9), (9, 0), (1, 1), (1000, 3), (70_001, 123_457)])
def test_crc32_combine_is_the_checksum_of_the_joined_text(sizes: tuple[int, int]) -> None:
    """Worker threads checksum their own chunks; the writer's combination equals one pass over the whole."""
    from collector.traceformat.deflate import crc32_combine

    rng = np.random.default_rng(sum(sizes))
    a, b = (rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
