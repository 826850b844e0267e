"""The event table: columns and dtypes, and the msgspec path equals the stdlib fallback, batch by batch."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.model import Trace
from collector.traceformat import parse_json
from collector.traceformat.events import EVENT_COLUMNS, read_events
from collector.traceformat.write import write_trace

ROOT = Path(__file__).resolve().parents[2]


def assert_tables_equal(path: Path, **kw: Any) -> pd.DataFrame:
    """The stdlib path's table, checked equal to the msgspec path's."""
    slow = read_events(path, fast=False, **kw)
    fast = read_events(path, fast=True, **kw)
    pd.testing.assert_frame_equal(fast.events, slow.events)
    assert fast.top == slow.top and fast.id_names == slow.id_names
    return fast.events


def test_columns_and_dtypes(tmp_path: Path, kineto_like: Callable[..., Path]) -> None:
    events = read_events(kineto_like(tmp_path / "k.json")).events
    assert list(events.columns) == list(EVENT_COLUMNS)
    assert {c: str(t) for c, t in events.dtypes.items()} == EVENT_COLUMNS
    x = events[events["ph"] == "X"]
    assert (x["ts_ns"] >= 0).all() and (x["dur_ns"] >= 0).all()
    assert set(x["cat"]) >= {"cpu_op", "python_function", "cuda_runtime", "kernel", "gpu_memcpy"}
    kernels = x[x["cat"] == "kernel"]
    assert (kernels["arg_correlation"] > 0).all() and (kernels["arg_stream"] > 0).all()
    flows = events[events["ph"].isin(["s", "f"])]
    assert (flows["flow_id"] >= 0).all() and len(flows) > 0
    assert (events["arg_kind"] == "").all()  # our fields are not read from other traces


@pytest.mark.parametrize("batch", [1, 7, 100_000])
def test_fast_equals_stdlib_on_kineto(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, kineto_like: Callable[..., Path]
) -> None:
    monkeypatch.setattr(parse_json, "BATCH", batch)
    path = kineto_like(tmp_path / "k.json", 50_000 if batch == 1 else 200_000)
    before = path.read_bytes()
    events = assert_tables_equal(path)
    assert path.read_bytes() == before  # batches are bracketed in a private copy-on-write mapping
    assert len(events) > 100


@pytest.mark.parametrize("batch", [3, 100_000])
def test_fast_equals_stdlib_on_ours(tmp_path: Path, trace: Trace, monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    monkeypatch.setattr(parse_json, "BATCH", batch)
    write_trace(trace, tmp_path / "ours.json.gz")
    events = assert_tables_equal(tmp_path / "ours.json.gz")
    assert set(events["arg_kind"]) > {"kernel", "step"}


def test_odd_but_valid_shapes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Array-only traces, string ids, pretty-printed JSON, separators inside names, null-free args."""
    monkeypatch.setattr(parse_json, "BATCH", 2)
    events = [
        {"ph": "X", "name": "a,b],[{", "cat": "x", "pid": "Spans", "tid": "stream 7", "ts": 0, "dur": 1},
        {"ph": "i", "name": "mark", "pid": 1, "tid": 2, "ts": 3.5, "s": "t"},
        {"ph": "s", "id": "0x1f", "pid": 1, "tid": 2, "ts": 4},
        {"ph": "X", "name": "ünï", "pid": 1, "tid": 2, "ts": 5.0005, "dur": 0, "args": {}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "worker"}},
    ]
    (tmp_path / "array.json").write_text(json.dumps(events))
    table = assert_tables_equal(tmp_path / "array.json")
    assert table["pid"].tolist()[:2] == [-2, 1] and table["tid"].iloc[0] == -3
    (tmp_path / "pretty.json").write_text(json.dumps({"traceEvents": events, "x": [1, {"y": 2}]}, indent=4))
    pretty = assert_tables_equal(tmp_path / "pretty.json")
    pd.testing.assert_frame_equal(table, pretty)
    names = read_events(tmp_path / "pretty.json")
    assert names.id_names == {-2: "Spans", -3: "stream 7", -4: "0x1f"}
    assert names.top == {"x": [1, {"y": 2}]}
    assert table["ts_ns"].tolist() == [0, 3500, 4000, 5000, -1]  # 5.0005 us rounds to 5000 ns (half to even)


def test_gzip_equals_plain(tmp_path: Path, kineto_like: Callable[..., Path]) -> None:
    path = kineto_like(tmp_path / "k.json")
    gz = tmp_path / "k.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    pd.testing.assert_frame_equal(read_events(path).events, read_events(gz).events)


def test_top_level_object_is_kept(tmp_path: Path, kineto_like: Callable[..., Path]) -> None:
    top = read_events(kineto_like(tmp_path / "k.json")).top
    assert top["schemaVersion"] == 1 and top["deviceProperties"][0]["name"] == "NVIDIA H200"
    assert top["distributedInfo"]["rank"] == 0 and "traceEvents" not in top


def test_null_in_args_counts_as_absent(tmp_path: Path) -> None:
    """torch.profiler with_stack traces hold "Python parent id": null for a root frame."""
    events = [
        {
            "ph": "X",
            "cat": "python_function",
            "name": "f",
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 2,
            "args": {"Python id": 1, "Python parent id": None, "name": None, "stream": None},
        },
        {
            "ph": "X",
            "cat": "python_function",
            "name": "g",
            "pid": 1,
            "tid": 1,
            "ts": 1,
            "dur": 1,
            "args": {"Python id": 2, "Python parent id": 1},
        },
    ]
    (tmp_path / "nulls.json").write_text(json.dumps({"traceEvents": events}))
    table = assert_tables_equal(tmp_path / "nulls.json")
    assert table["arg_python_parent_id"].tolist() == [-1, 1]
    assert table["arg_name"].tolist() == ["", ""] and table["arg_stream"].tolist() == [-1, -1]


@pytest.mark.parametrize("sample", sorted((ROOT / "sample_traces").glob("*.json.gz")), ids=lambda p: p.name)
def test_sample_traces_read_alike(sample: Path) -> None:
    """The real traces recorded on the GPU (ours and torch.profiler's) give one table on both paths."""
    assert len(assert_tables_equal(sample)) > 0
