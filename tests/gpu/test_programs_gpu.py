"""GPU tests of programs that are not a training loop with an optimizer: an inference loop (op naming ends by
itself), a loop of CUDA graph replays (each replay a step, its kernels under its span), torch.compile (its
compiling kept out of every step; Triton kernels named by their graph; with mode="reduce-overhead" the
replays are the steps). In-process, CUPTI timing; each test records a few hundred milliseconds of work
(the compiled ones first compile a two-layer MLP: about 10-30 s)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.gpu


def _recorded(run: Callable[[], Any], **options: Any) -> Any:
    """``run()`` recorded with CUPTI timing; the trace with its steps found, as a trace file loads."""
    import torch

    from collector.recording.api import record
    from collector.steps import find_steps

    rec = record("programs", None, probe=False, timing="cupti", **options)
    rec.start()
    try:
        run()
        torch.cuda.synchronize()
    finally:
        rec.stop()
    assert rec.timing == "cupti" and rec.trace is not None
    return find_steps(rec.trace)


def _launched_by(iv: pd.DataFrame) -> np.ndarray:
    """The name of the interval that launched each row ("" where none)."""
    names = iv.set_index("id")["name"].astype(str)
    return names.reindex(iv["launch_id"]).fillna("").to_numpy(dtype=object)


def test_an_inference_loop_names_ops_until_the_loop_repeats() -> None:
    """30 iterations of 400 tiny in-place ops, no optimizer, no step marks: ops are named until 1,000 ops in a
    row named nothing new (not for all 12,000), the mode leaves, and later kernels are named by their kernel."""
    import torch
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    params = [torch.randn(64, device="cuda") for _ in range(200)]

    def run() -> None:
        with torch.no_grad():
            for _ in range(30):
                for p in params:
                    p.mul_(0.999).add_(0.001)

    trace = _recorded(run)
    notes = trace.meta.notes
    assert notes["op_naming"]["stopped_by"] == "repeat", notes["op_naming"]
    assert 1_000 <= notes["op_naming"]["ops"] <= 1_100
    assert "ops named until the loop's repeat" in notes["op_names"], notes["op_names"]
    iv = trace.intervals
    kernels = iv[iv["kind"] == "kernel"]
    assert len(kernels) == 12_000
    assert set(kernels["name"].astype(str)) == {"aten::mul_", "aten::add_"}
    assert _get_current_dispatch_mode() is None


def _mlp_step(compile: bool = False) -> tuple[Callable[[], Any], Any]:
    """A two-layer MLP's training step (SGD with momentum) on static tensors, the model compiled with
    ``compile``: (step, static input)."""
    import torch
    from torch import nn

    net = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda()
    model = torch.compile(net) if compile else net
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(256, 512, device="cuda")
    y = torch.randint(0, 10, (256,), device="cuda")

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, x


def test_a_loop_of_graph_replays_is_stepped_by_its_replays() -> None:
    """An eager warm-up (its optimizer steps marked), a capture, then 40 iterations of a new batch copied in
    and a replay: 40 steps by the replays, each replay's kernels inside its labelled span, warm-up in set-up."""
    import torch

    step, x = _mlp_step()
    batches = [torch.randn_like(x) for _ in range(2)]

    def run() -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        for i in range(40):
            x.copy_(batches[i % 2])
            graph.replay()

    trace = _recorded(run, auto_steps=True)
    assert trace.meta.step_method == "repeat:graph", trace.meta.step_method
    assert len(trace.steps()) == 40
    iv = trace.intervals
    spans = iv[iv["name"].astype(str).str.fullmatch(r"CUDA graph \d+ replay")]
    assert len(spans) == 40 and sorted(spans["step"]) == list(range(40))
    in_graph = iv[(iv["kind"] == "kernel").to_numpy() & (_launched_by(iv) == "cudaGraphLaunch")]
    assert len(in_graph) >= 40 * 4  # forward, backward and the update of each replay
    s, e = spans["start_ns"].to_numpy(), spans["end_ns"].to_numpy()
    inside = [((s <= a) & (e >= b)).any() for a, b in zip(in_graph["start_ns"], in_graph["end_ns"], strict=True)]
    assert all(inside)
    first = iv.loc[iv["name"].astype(str) == "cudaGraphLaunch", "start_ns"].min()
    warm = iv[(iv["kind"] == "kernel").to_numpy() & (_launched_by(iv) != "cudaGraphLaunch")]
    assert (warm.loc[warm["start_ns"] < first, "step"] == -1).all()  # the warm-up is set-up


def test_a_compiled_model_keeps_its_compiling_out_of_every_step() -> None:
    """torch.compile's first step compiles: it is set-up (``notes.setup_windows``), no step overlaps it, and
    the compiled graph's Triton kernels carry its name."""
    step, _ = _mlp_step(compile=True)

    def run() -> None:
        for _ in range(20):
            step()

    trace = _recorded(run, auto_steps=True)
    windows = trace.meta.notes.get("setup_windows") or []
    assert any(w[0] == "torch.compile: compiling" for w in windows), windows
    steps = trace.steps()
    assert 15 <= len(steps) <= 19, steps
    for _, start, end in windows:
        assert not ((steps["start_ns"] < end) & (steps["end_ns"] > start)).any()
    names = set(trace.intervals.loc[trace.intervals["kind"] == "kernel", "name"].astype(str))
    assert any(n.startswith("torch.compile graph") and "triton" in n for n in names), sorted(names)[:20]


def test_reduce_overhead_replays_are_the_steps() -> None:
    """torch.compile(mode="reduce-overhead") replays CUDA graphs: in an inference loop without step marks,
    its replays are the steps and its graph recording is set-up."""
    import torch
    from torch import nn

    net = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 10)).cuda().eval()
    fast = torch.compile(net, mode="reduce-overhead")
    xs = [torch.randn(256, 512, device="cuda") for _ in range(2)]

    def run() -> None:
        with torch.no_grad():
            for i in range(30):
                fast(xs[i % 2])

    trace = _recorded(run)
    assert trace.meta.step_method == "repeat:graph", trace.meta.step_method
    assert 24 <= len(trace.steps()) <= 30
    spans = trace.intervals[trace.intervals["name"].astype(str).str.fullmatch(r"CUDA graph \d+ replay")]
    assert len(spans) >= 24
