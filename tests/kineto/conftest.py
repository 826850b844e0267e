"""Fixtures for the Kineto importer tests: a tiny stdlib reader into the EventTable contract.

``table_from_json`` is a deliberately plain reader (json + a dict per event) used to check the importer
independently of collector.traceformat.events.read_events; tests that exercise the real reader say so.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from collector.traceformat.collective_meta import DTYPE_BYTES, group_label
from collector.traceformat.events import EVENT_COLUMNS, EventTable

DATA = Path(__file__).parent / "data"

_ARGS = {
    "arg_name": "name",
    "arg_stream": "stream",
    "arg_device": "device",
    "arg_correlation": "correlation",
    "arg_external_id": "External id",
    "arg_bytes": "bytes",
    "arg_python_id": "Python id",
    "arg_python_parent_id": "Python parent id",
}


def table_from_json(path: str | Path) -> EventTable:
    """Read a Chrome trace (.json or .json.gz) into an EventTable with the stdlib only."""
    raw = Path(path).read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc.pop("traceEvents")
    id_names: dict[int, str] = {}

    def ident(value: Any) -> int:
        if isinstance(value, int):
            return value
        for k, v in id_names.items():
            if v == str(value):
                return k
        neg = -(len(id_names) + 2)
        id_names[neg] = str(value)
        return neg

    cols: dict[str, list[Any]] = {c: [] for c in EVENT_COLUMNS}
    for e in events:
        args = e.get("args") or {}
        cols["ph"].append(e.get("ph", ""))
        cols["cat"].append(e.get("cat", ""))
        cols["name"].append(e.get("name", ""))
        cols["pid"].append(ident(e.get("pid", -1)))
        cols["tid"].append(ident(e.get("tid", -1)))
        cols["ts_ns"].append(round(float(e.get("ts", 0)) * 1000))
        cols["dur_ns"].append(round(float(e["dur"]) * 1000) if "dur" in e else -1)
        cols["flow_id"].append(int(e["id"]) if e.get("ph") in ("s", "t", "f") and "id" in e else -1)
        for col, key in _ARGS.items():
            value = args.get(key)
            if col == "arg_name":
                cols[col].append(str(value) if value is not None else "")
            else:
                cols[col].append(int(value) if isinstance(value, (int, float)) else -1)
        if "In msg nelems" in args:  # torch.profiler's collective metadata: bytes and process group
            message = max(args["In msg nelems"], args.get("Out msg nelems", -1))
            if "bytes" not in args:
                cols["arg_bytes"][-1] = message * DTYPE_BYTES.get(args.get("dtype", ""), 0)
            name, desc = str(args.get("Process Group Name", "")), str(args.get("Process Group Description", ""))
            cols["arg_group"].append(group_label(name, desc))
        for col in EVENT_COLUMNS:
            if len(cols[col]) < len(cols["ph"]):
                dtype = EVENT_COLUMNS[col]
                cols[col].append(False if dtype == "bool" else "" if dtype == "category" else -1)
    frame = pd.DataFrame({c: pd.Series(v, dtype=EVENT_COLUMNS[c]) for c, v in cols.items()})
    return EventTable(doc, frame, id_names)


@pytest.fixture(scope="session")
def plain_reader() -> Callable[[str | Path], EventTable]:
    return table_from_json


@pytest.fixture
def gpu_fixture() -> EventTable:
    return table_from_json(DATA / "gpu_fixture.json")
