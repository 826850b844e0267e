"""What the analysis reads from real GPU runs: a torch.profiler trace's Python calls as host time, and
launches held by a full launch queue as waits for the GPU (skipped without CUDA by tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from host_work import spin

pytestmark = pytest.mark.gpu


def load_batch() -> None:
    spin(0.004)


def test_a_profiled_host_bound_loop_names_its_python_frames(tmp_path: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from collector.load import load_trace
    from webapp.analysis import analyze

    out = tmp_path / "host-bound.pt.trace.json.gz"
    x = torch.randn(1024, 1024, device="cuda")
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=6),
        on_trace_ready=lambda p: p.export_chrome_trace(str(out)),
        with_stack=True,
    ) as prof:
        for _ in range(9):
            load_batch()
            (x @ x).sum().item()
            prof.step()
    result = analyze(load_trace(out))
    assert result.host_frames_basis == "traced"
    frames = result.host_frames.set_index("frame")
    hot = [f for f in frames.index if f.startswith("load_batch (") and "test_profiler_truth_gpu.py:" in f]
    assert hot and frames.loc[hot[0], "total_frac"] > 0.5
    per = result.per_step
    assert len(per) >= 5 and float(np.median(per["cp_host_ns"])) > 0.5 * float(np.median(per["step_time_ns"]))
    # listed or minor: its cost is the best replayed fix (CUDA graphs cut a few launches of a step that is
    # Python), a fraction of a percent either side of the listing threshold; the fix says to cut the Python
    f = {x.rule: x for x in (*result.findings, *result.minor_findings)}["host-bound"]
    assert "load_batch" in f.detail and "the host's time per step is its own work" in f.fix


def test_launches_held_by_a_full_queue_are_waits_for_the_gpu() -> None:
    """A long kernel, then thousands of tiny ones: the host fills the launch queue behind the long kernel and
    the launch that finds it full blocks until the kernel ends. The graph reads that launch as a wait for the
    GPU (one per step), so the long kernel is on the critical path as GPU compute, not as host time. The
    launches after it (about 3000 of some microseconds each, for sub-microsecond kernels) are host-bound, and
    the path says so: host and compute fill the step. The steps replay exactly."""
    import torch

    from collector.recording.api import record
    from collector.steps import find_steps
    from webapp.analysis.causal import causal_model
    from webapp.analysis.causal.critical import COMPUTE_P, HOST
    from webapp.analysis.context import prepare

    y = torch.zeros(8, device="cuda")
    torch.cuda._sleep(1_000)  # load the sleep kernel before recording
    torch.cuda.synchronize()
    rec = record("full-queue", None, probe=False, stacks=False)
    with rec:
        for _ in range(4):
            # about 50 ms at GPU clocks, room for the first step's launches (slower: they also name their ops) to
            # fill the queue before it ends; at 25 ms one H100 host showed a full queue in 3 steps of 4
            torch.cuda._sleep(100_000_000)
            for _ in range(4000):
                y.add_(1)
            rec.step()
        torch.cuda.synchronize()
    assert rec.trace is not None
    rd = prepare(find_steps(rec.trace))
    cm = causal_model(rd)
    blocked = cm.graph.h_wait & ~cm.graph.h_sync
    assert blocked.sum() >= 4
    assert float(cm.error.max()) <= 0.02
    iv = rec.trace.intervals
    gpu = iv[iv["lane_kind"] == "compute_stream"]
    long_ns = float(np.median((gpu["end_ns"] - gpu["start_ns"]).nlargest(4)))
    host, compute = cm.critical[:, HOST], cm.critical[:, COMPUTE_P]
    steps = rd.win.ends - rd.win.starts
    assert float(np.median(compute[1:])) >= 0.95 * long_ns, (compute, long_ns)
    assert float(np.median(host[1:])) <= float(np.median(steps[1:])) - 0.95 * long_ns, (host, steps, long_ns)
    assert float(np.min((host + compute)[1:] / steps[1:])) >= 0.95, (host, compute, steps)
