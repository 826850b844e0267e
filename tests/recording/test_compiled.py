"""torch.compile while recording: compiled graphs' Triton kernels named after their graph's call, compiling
and CUDA graph recording kept out of every step, and the hooks going in only when torch.compile is used."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from collector.importers.kineto import trace_from_kineto
from collector.model import RunMeta, Trace
from collector.recording.enrich import HostFacts, enrich, without_setup_steps
from collector.synthetic.cupti import EventRows

ROOT = Path(__file__).resolve().parents[2]
MAIN, STREAM = 3001, 7
TRITON = "triton_poi_fused_add_relu_0"
REGION = "torch.compile graph 0 forward"


def _compiled_steps(steps: int = 4) -> tuple[Trace, list[tuple[int, str, int, int]]]:
    """Each step: a compiled graph's call launching a Triton kernel (driver call) and an extern mm (an aten
    op, named while naming was on in step 0), then an eager kernel outside the graph."""
    rows = EventRows()
    regions = []
    t = 1_000_000
    for step in range(steps):
        regions.append((MAIN, REGION, t, t + 60_000))
        c = rows.call(MAIN, "cuLaunchKernel", t + 5_000)
        rows.gpu("kernel", TRITON, STREAM, t + 10_000, 5_000, c)
        if step == 0:
            rows.op(MAIN, "aten::mm", t + 20_000, t + 40_000)
        c = rows.call(MAIN, "cudaLaunchKernel", t + 25_000)
        rows.gpu("kernel", "sm90_gemm", STREAM, t + 30_000, 20_000, c)
        c = rows.call(MAIN, "cudaLaunchKernel", t + 70_000)
        rows.gpu("kernel", "vectorized_elementwise_kernel", STREAM, t + 75_000, 5_000, c)
        t += 100_000
    markers = [("step", f"step {i}", 1_000_000 + i * 100_000, 1_100_000 + i * 100_000, i) for i in range(steps)]
    facts = HostFacts(markers=markers, threads={MAIN: "main thread"}, regions=regions)
    return enrich(trace_from_kineto(rows.table()), facts, RunMeta.new(workload="compiled")), regions


def test_triton_kernels_are_named_after_their_compiled_graphs_call() -> None:
    trace, _ = _compiled_steps()
    iv = trace.intervals
    kernels = iv[iv["kind"] == "kernel"]
    names = kernels["name"].astype(str).value_counts().to_dict()
    assert names == {f"{REGION}: {TRITON}": 4, "aten::mm": 4, "vectorized_elementwise_kernel": 4}
    assert "4 by their compiled region" in trace.meta.notes["op_names"]
    spans = iv[(iv["kind"] == "annotation") & (iv["name"].astype(str) == REGION)]
    assert len(spans) == 4 and set(spans["lane_label"].astype(str)) == {"main thread"}


def test_steps_that_hold_compiling_are_set_up_and_the_rest_renumbered() -> None:
    trace, _ = _compiled_steps(steps=5)
    out = without_setup_steps(trace, [(1_000_000, 1_050_000), (1_230_000, 1_240_000)])  # in steps 0 and 2
    assert out.steps()["step"].tolist() == [0, 1, 2]
    assert out.steps()["start_ns"].tolist() == [1_100_000, 1_300_000, 1_400_000]
    assert out.markers.sort_values("start_ns")["name"].tolist() == ["step 0", "step 1", "step 2"]
    iv, before = out.intervals, trace.intervals
    moved = pd.Series(iv["step"].to_numpy(), index=before["step"].to_numpy())
    assert set(moved.loc[[0, 2]]) == {-1} and set(moved.loc[1]) == {0} and set(moved.loc[4]) == {2}
    assert without_setup_steps(trace, []) is trace
    assert without_setup_steps(trace, [(0, 10)]) is trace  # before every step


def test_hooks_go_in_when_torch_compile_is_used_and_report_its_compiling_and_calls() -> None:
    """A real torch.compile on this host's CPU (Inductor): nothing of Dynamo is imported by installing the
    hooks; its compilation is reported as set-up and each call of the compiled graph as a region."""
    code = textwrap.dedent(
        """
        import sys
        from collector.recording import compiled
        regions, setup = [], []
        undo = compiled.install(lambda n, a, b: regions.append(n), lambda w, a, b: setup.append(w))
        import torch
        print("dynamo:", "torch._dynamo" in sys.modules and "torch._dynamo.callback" in sys.modules)
        f = torch.compile(lambda x: (x * 2 + 1).relu().sum())
        for _ in range(3):
            f(torch.randn(64))
        undo()
        f(torch.randn(64))
        print("setup:", setup)
        print("regions:", regions)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 and "InductorError" in done.stderr:
        pytest.skip("Inductor cannot compile on this host")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "dynamo: False" in out
    assert "setup: ['torch.compile: compiling']" in out
    assert f"regions: {[REGION] * 3}" in out  # the call after undo is not reported
