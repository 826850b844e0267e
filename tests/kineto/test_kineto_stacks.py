"""Python calls of a torch.profiler trace (``with_stack=True``) cut into stretches of one stack."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collector.importers.kineto import trace_from_kineto
from collector.importers.kineto_stacks import frame_text
from collector.traceformat.events import EventTable


def _call(name: str, tid: int, ts: float, dur: float, py_id: int, parent: int | None) -> dict[str, Any]:
    args = {"Python id": py_id, "Python parent id": parent}
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _stretches(tmp_path: Path, reader: Callable[[Path], EventTable], events: list[dict[str, Any]]) -> list[tuple]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    iv = trace_from_kineto(reader(path)).intervals
    s = iv[iv["kind"] == "sample"]
    return list(zip(s["stream"], s["start_ns"] // 1000, s["end_ns"] // 1000, s["name"].astype(str), strict=True))


def test_each_stretch_is_a_calls_own_time_under_its_stack(tmp_path: Path, plain_reader) -> None:
    events = [
        _call("a.py(1): outer", 7, 0, 100, 1, None),
        _call("a.py(5): inner", 7, 10, 30, 2, 1),
        _call("<built-in method item of Tensor object at 0x7f3a2c>", 7, 20, 10, 3, 2),
        _call("a.py(9): second", 7, 40, 20, 4, 1),  # starts as inner ends
        _call("a.py(7): nothing", 7, 70, 0, 5, 1),  # no time: outer goes on as one stretch
        _call("/x/site-packages/torch/nn/modules/module.py(1739): _call_impl", 8, 5, 10, 6, None),  # other thread
    ]
    o, i, m = "outer (a.py:1)", "inner (a.py:5)", "<built-in method item of Tensor object>"
    assert _stretches(tmp_path, plain_reader, events) == [
        (-7, 0, 10, o),
        (-7, 10, 20, f"{o};{i}"),
        (-7, 20, 30, f"{o};{i};{m}"),
        (-7, 30, 40, f"{o};{i}"),
        (-7, 40, 60, f"{o};second (a.py:9)"),
        (-7, 60, 100, o),
        (-8, 5, 15, "_call_impl (torch/nn/modules/module.py:1739)"),
    ]


def test_calls_that_do_not_nest_never_make_overlapping_stretches(tmp_path: Path, plain_reader) -> None:
    events = [
        _call("a.py(1): outer", 7, 0, 50, 1, None),
        _call("a.py(2): spills", 7, 40, 30, 2, 1),  # ends after its parent
        _call("a.py(3): orphan", 7, 80, 10, 3, 99),  # its parent is not in the trace
    ]
    got = _stretches(tmp_path, plain_reader, events)
    assert all(a[2] <= b[1] for a, b in zip(got, got[1:], strict=False))
    assert (-7, 80, 90, "orphan (a.py:3)") in got and (-7, 40, 50, "outer (a.py:1);spills (a.py:2)") in got


def test_frame_names_read_like_the_recorders() -> None:
    assert frame_text("train.py(41): step") == "step (train.py:41)"
    assert frame_text("/usr/lib/python3/dist-packages/timm/models/resnet.py(20): forward") == (
        "forward (timm/models/resnet.py:20)"
    )
    assert frame_text("nn.Module: Linear_0") == "nn.Module: Linear_0"
