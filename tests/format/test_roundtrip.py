"""Our trace file round-trips every lane kind, interval kind, marker and metadata field exactly."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from collector.load import load_trace
from collector.model import INTERVAL_COLUMNS, IntervalKind, LaneKind, Trace, conform_intervals
from collector.traceformat.read import read_trace
from collector.traceformat.spec import STREAMSCOPE_KEY
from collector.traceformat.write import CATEGORIES, write_trace


def assert_same(a: Trace, b: Trace) -> None:
    pd.testing.assert_frame_equal(a.intervals, b.intervals, check_categorical=False)
    pd.testing.assert_frame_equal(a.markers, b.markers, check_categorical=False)
    assert a.lanes == b.lanes
    assert a.meta == b.meta


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_round_trip_is_exact(tmp_path: Path, trace: Trace, suffix: str) -> None:
    path = tmp_path / f"run{suffix}"
    write_trace(trace, path)
    back = read_trace(path)
    assert_same(trace, back)
    assert set(back.intervals["kind"].astype(str)) == {k.value for k in IntervalKind}
    assert {ln.kind for ln in back.lanes} == set(LaneKind)
    assert back.intervals["start_ns"].iloc[0] == trace.intervals["start_ns"].iloc[0]  # int ns, epoch-sized
    assert_same(trace.with_meta(step_method="markers"), load_trace(path))  # load_trace names how steps were found


def test_gzip_file_is_gzip(tmp_path: Path, trace: Trace) -> None:
    path = tmp_path / "run.json.gz"
    write_trace(trace, path)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    json.loads(gzip.decompress(path.read_bytes()))


def test_rewrite_is_identical(tmp_path: Path, trace: Trace) -> None:
    write_trace(trace, tmp_path / "a.json")
    write_trace(read_trace(tmp_path / "a.json"), tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_file_is_plain_chrome_trace(tmp_path: Path, trace: Trace) -> None:
    """What Perfetto needs: valid JSON, X events with numeric non-negative ts/dur, named processes/threads."""
    path = tmp_path / "run.json"
    write_trace(trace, path)
    doc = json.loads(path.read_text())
    assert doc[STREAMSCOPE_KEY]["format_version"] == 1
    assert isinstance(doc["baseTimeNanoseconds"], int)
    events = doc["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == len(trace.intervals) + len(trace.markers)
    assert all(isinstance(e["ts"], float) and e["ts"] >= 0 and e["dur"] >= 0 for e in xs)
    assert all(isinstance(e["pid"], int) and isinstance(e["tid"], int) for e in events)
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert procs == {0: "rank 0", 1: "rank 1"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    for tid, lane in enumerate(trace.lanes):
        assert threads[(lane.rank, tid)] == lane.label
    cats = {e["args"]["kind"]: e["cat"] for e in xs if e["tid"] in (0, 3)}
    assert cats["launch"] == "cuda_runtime" and cats["cpu_op"] == "cpu_op"
    gpu_cats = {e["cat"] for e in xs if e["args"]["kind"] == "kernel"}
    assert gpu_cats == {CATEGORIES["kernel"]} == {"kernel"}
    assert {e["cat"] for e in xs if e["args"]["kind"] == "memcpy_h2d"} == {"gpu_memcpy"}
    assert {e["cat"] for e in xs if e["args"]["kind"] == "annotation"} == {"user_annotation", "gpu_user_annotation"}
    assert {e["cat"] for e in xs if e["args"]["kind"] in ("step", "mark")} == {"step", "mark"}


def test_empty_trace_round_trips(tmp_path: Path, trace: Trace) -> None:
    empty = Trace.build(trace.meta, trace.lanes, [])
    write_trace(empty, tmp_path / "empty.json")
    assert_same(empty, read_trace(tmp_path / "empty.json"))


def test_columns_and_dtypes(tmp_path: Path, trace: Trace) -> None:
    write_trace(trace, tmp_path / "run.json")
    frame = read_trace(tmp_path / "run.json").intervals
    assert list(frame.columns) == list(INTERVAL_COLUMNS)
    for name, (dtype, _) in INTERVAL_COLUMNS.items():
        if isinstance(dtype, pd.CategoricalDtype):
            assert frame[name].dtype == dtype, name
        else:
            assert str(frame[name].dtype) == str(dtype), name
    assert (frame["dur_ns"] == frame["end_ns"] - frame["start_ns"]).all()
    pd.testing.assert_frame_equal(conform_intervals(frame), frame)


def test_write_is_atomic(tmp_path: Path, trace: Trace) -> None:
    path = tmp_path / "run.json"
    write_trace(trace, path)
    before = path.read_bytes()
    bad = trace.intervals.copy()
    bad.loc[0, "end_ns"] = bad.loc[0, "start_ns"] - 1
    with pytest.raises(ValueError, match="negative duration"):
        write_trace(Trace(trace.meta, trace.lanes, bad, trace.markers), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert path.stat().st_mode & 0o777 == 0o644


def test_large_times_stay_exact(tmp_path: Path, trace: Trace) -> None:
    """Nanosecond precision over a long run: ts is relative to baseTimeNanoseconds, so doubles suffice."""
    base = trace
    iv = base.intervals.copy()
    iv["start_ns"] = iv["start_ns"] + (iv.index.to_numpy() * 3_600_000_000_007)  # hours apart, odd ns
    iv["end_ns"] = iv["start_ns"] + 1
    t = Trace(base.meta, base.lanes, conform_intervals(iv), base.markers)
    write_trace(t, tmp_path / "long.json.gz")
    assert_same(t, read_trace(tmp_path / "long.json.gz"))


def test_imported_torch_profiler_trace_round_trips(tmp_path: Path, kineto_like: Callable[..., Path]) -> None:
    """Whatever the torch.profiler importer builds survives our format exactly."""
    pytest.importorskip("collector.importers.kineto")
    imported = load_trace(kineto_like(tmp_path / "kineto.json"))
    assert len(imported.intervals) > 100
    write_trace(imported, tmp_path / "ours.json.gz")
    assert_same(imported, read_trace(tmp_path / "ours.json.gz"))


def test_the_docs_show_the_run_columns_as_declared() -> None:
    from pathlib import Path

    from collector.model import describe_columns

    doc = (Path(__file__).resolve().parents[2] / "docs" / "trace-format.md").read_text()
    assert describe_columns() in doc
