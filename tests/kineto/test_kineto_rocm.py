"""A real torch.profiler trace recorded on an AMD MI250 (ROCm 6.2) loads and is analysed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.load import load_trace
from collector.traceformat.events import read_events
from collector.traceformat.spec import TraceFileError
from webapp.analysis import analyze

ROCM = Path(__file__).parent / "data" / "rocm_mi250_train.pt.trace.json.gz"


def test_rocm_trace_loads_with_hip_names() -> None:
    trace = load_trace(ROCM)
    df = trace.intervals
    assert trace.meta.device_name == "AMD Radeon Graphics" and trace.meta.step_method == "markers"
    assert len(trace.steps()) == 2
    assert (df["kind"] == "kernel").sum() == 14 and (df["kind"] == "memcpy_h2d").sum() == 2
    waits = df[df["kind"] == "sync_wait"].set_index("name")["cause"].astype(str)
    assert set(waits["hipMemcpyWithStream"]) == {"blocking_copy"}  # the synchronous HIP copy blocks the host
    assert waits["hipDeviceSynchronize"] == "synchronize"
    assert (df.loc[df["kind"] == "kernel", "launch_id"] >= 0).all()
    result = analyze(trace)
    # the second ProfilerStep opened as the profiler stopped: nothing ran in it, so it is no step
    assert result.metrics["steps"] == 1 and result.metrics["compute_busy_ns"] > 0


@pytest.mark.parametrize("fast", [True, False], ids=["msgspec", "stdlib"])
def test_stream_ids_written_as_strings(tmp_path: Path, fast: bool) -> None:
    x = {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}
    events = [{**x, "args": {"stream": "0x1f"}}, {**x, "args": {"stream": "7"}}, {**x, "args": {"stream": 3}}]
    path = tmp_path / "rocm.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert read_events(path, fast=fast).events["arg_stream"].tolist() == [31, 7, 3]
    path.write_text(json.dumps({"traceEvents": [*events, {**x, "args": {"stream": "0xzz"}}]}))
    with pytest.raises(TraceFileError, match=r"event 3: 'args.stream' should be an integer \(got \"0xzz\"\)"):
        read_events(path, fast=fast)
