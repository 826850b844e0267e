"""The recorder's host stack samples and its own cost per CUDA call, and the replay of recorded loops, on a
GPU (skipped elsewhere by tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest
from host_work import spin

from collector.model import Trace

pytestmark = pytest.mark.gpu


def prepare_batch() -> None:
    spin(0.004)


def _host_bound_trace() -> Trace:
    import torch

    from collector.recording.api import record
    from collector.steps import find_steps

    x = torch.randn(1024, 1024, device="cuda")
    rec = record("host-bound", None, probe=False)
    with rec:
        for _ in range(40):  # ~170 ms: 30 or more samples at 200 Hz
            prepare_batch()
            (x @ x).sum()
            rec.step()
    assert rec.trace is not None
    return find_steps(rec.trace)


def test_samples_show_where_the_host_time_goes_and_the_replay_holds() -> None:
    from webapp.analysis import analyze

    trace = _host_bound_trace()
    notes = trace.meta.notes
    assert 0 < notes.get("recorder_call_ns", 0) < 50_000, notes
    assert notes.get("stack_samples", 0) > 20, notes
    samples = trace.intervals[trace.intervals["kind"] == "sample"]
    assert len(samples) and samples["lane_label"].astype(str).str.contains("sampled").all()
    result = analyze(trace)
    frames = result.host_frames.set_index("frame")
    hot = [f for f in frames.index if f.startswith("prepare_batch (tests/gpu/test_causal_gpu.py:")]
    assert hot and frames.loc[hot[0], "total_frac"] > 0.5, frames.head(8)
    assert result.metrics["replay_error_max_frac"] <= 0.02, result.metrics
    # listed or minor: its cost is the best replayed fix (CUDA graphs cut a few launches of a step that is
    # Python), a fraction of a percent that falls either side of the listing threshold by GPU
    found = {x.rule: x for x in (*result.findings, *result.minor_findings)}
    assert "host-bound" in found, list(found)
    f = found["host-bound"]
    assert "prepare_batch" in f.detail and "a host with no time of its own would save" in f.detail, f.detail
    # the critical path of a host-bound step is mostly host work
    per = result.per_step
    assert float(np.median(per["cp_host_ns"])) > 0.5 * float(np.median(per["step_time_ns"])), per.describe()


def test_sampling_can_be_turned_off() -> None:
    import torch

    from collector.recording.api import record

    x = torch.ones(8, device="cuda")
    rec = record("no-stacks", None, probe=False, stacks=False)
    with rec:
        for _ in range(3):
            x.add_(1)
            rec.step()
    assert rec.trace is not None
    assert not (rec.trace.intervals["kind"] == "sample").any()
    assert "stack_samples" not in rec.trace.meta.notes


def test_a_full_collection_in_the_loop_is_a_span_and_its_sampled_time() -> None:
    """A loop that holds many reference cycles and collects them once: the collection is an annotation row on
    the main thread, and the stack sampler's stretch across it gives its time to the collection, not to the
    frame sampled before it."""
    import gc

    import torch

    from collector.recording.api import record
    from collector.recording.gcspans import label

    held: list[list[object]] = [[] for _ in range(300_000)]
    for cell in held:
        cell.append(cell)  # a reference cycle: only the cyclic collector frees it
    x = torch.randn(256, 256, device="cuda")
    rec = record("gc-in-loop", None, probe=False)
    with rec:
        for i in range(12):
            prepare_batch()
            if i == 6:
                gc.collect()
            (x @ x).sum()
            rec.step()
    assert rec.trace is not None
    iv = rec.trace.intervals
    names = iv["name"].astype(str)
    collections = iv[(iv["kind"] == "annotation") & (names == label(2))]
    assert len(collections) >= 1, names[iv["kind"] == "annotation"].unique()
    sampled = iv[(iv["kind"] == "sample") & names.str.endswith(label(2))]
    assert len(sampled) >= 1 and int(sampled["dur_ns"].sum()) > 0, names[iv["kind"] == "sample"].unique()[:5]
    del held


def test_every_recording_in_a_process_measures_the_recorder_s_cost() -> None:
    """Recordings one after another in one process, each of a loop that moves pinned batches on a side
    stream (as the sample demos recorded in one process do, three of five of which read no cost): each
    measures its own cost per CUDA call."""
    import torch

    from collector.recording.api import record

    x = torch.randn(256, 256, device="cuda")
    batch = torch.randn(256, 256).pin_memory()
    side = torch.cuda.Stream()
    costs = []
    for i in range(3):
        rec = record(f"again-{i}", None, probe=False)
        with rec:
            for _ in range(10):
                with torch.cuda.stream(side):
                    y = batch.to("cuda", non_blocking=True)
                torch.cuda.current_stream().wait_stream(side)
                (x @ y).sum()
                rec.step()
        assert rec.trace is not None
        costs.append(rec.trace.meta.notes.get("recorder_call_ns", 0))
    assert all(0 < c < 50_000 for c in costs), costs
