"""Programs that are not a training loop with an optimizer, for overhead.py: loops in-process and short scripts.

In-process loops (:data:`PROGRAMS`; each ``next()`` of :func:`program_steps` runs one iteration; ``MARKED``
says whether the benchmark marks steps with ``rec.step()`` as a training loop's optimizer hook would):

* ``infer-tiny``: the tiny-op regime loop (200 x ``p.mul_(0.999).add_(0.001)``) as inference: no optimizer, no
  step marks, under ``torch.no_grad()``; the recorder must bound its op naming by itself;
* ``graph-replay``: a training step of a small MLP (forward, backward, SGD) captured once as a CUDA graph,
  replayed each iteration; no step marks (a replay runs no Python hook);
* ``compiled``: a training step of a small conv net under ``torch.compile`` (``--compiled-model resnet18``:
  timm's ResNet-18, channels-last, bf16 autocast), SGD, steps marked; compiled and autotuned at warm-up.

Short scripts (:data:`SCRIPTS`) run in a fresh process per mode (:func:`script_source`): the script's own
time from just after ``import torch`` to its end, the recorder's start and stop included where it records.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

PROGRAMS = ("infer-tiny", "graph-replay", "compiled")
MARKED = {"infer-tiny": False, "graph-replay": False, "compiled": True}
"""Whether each program's steps are marked (``rec.step()`` after each; an optimizer hook would)."""


def program_steps(name: str, device: str = "cuda", compiled_model: str = "convnet") -> Iterator[None]:
    """The program ``name`` as an iterator: each ``next()`` runs one iteration (set-up on the first)."""
    if name == "infer-tiny":
        return _infer_tiny(device)
    if name == "graph-replay":
        return _graph_replay(device)
    if name == "compiled":
        return _compiled(device, compiled_model)
    raise ValueError(f"unknown program {name!r}; programs: {', '.join(PROGRAMS)}")


def _infer_tiny(device: str) -> Iterator[None]:
    import torch

    params = [torch.randn(64, device=device) for _ in range(200)]
    while True:
        with torch.no_grad():
            for p in params:
                p.mul_(0.999).add_(0.001)
        yield


def _mlp(torch: Any, device: str) -> tuple[Any, Any, Any, Any]:
    net = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096),
        torch.nn.ReLU(),
        torch.nn.Linear(4096, 1024),
        torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    ).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(256, 1024, device=device)
    y = torch.randint(0, 10, (256,), device=device)
    return net, opt, x, y


def _graph_replay(device: str) -> Iterator[None]:
    import torch

    net, opt, x, y = _mlp(torch, device)

    def step() -> Any:
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch's CUDA graph notes ask
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        step()
    while True:
        graph.replay()
        yield


def _compiled(device: str, model: str) -> Iterator[None]:
    import torch
    from torch import nn

    if model == "resnet18":
        import timm

        net = timm.create_model("resnet18", num_classes=10).to(device).to(memory_format=torch.channels_last)
        x = torch.randn(64, 3, 224, 224, device=device).to(memory_format=torch.channels_last)
    else:
        from collector.demos.loops import small_convnet

        net = small_convnet().to(device)
        x = torch.randn(64, 3, 64, 64, device=device)
    y = torch.randint(0, 10, (x.shape[0],), device=device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    fast = torch.compile(net)
    while True:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(fast(x), y)
        loss.backward()
        opt.step()
        yield


def profiler(mode: str) -> Any:
    """torch.profiler started with the CUDA activity only (``prof-cuda``: CUPTI's own cost) or with CPU and
    CUDA (``prof``)."""
    import torch

    activities = [torch.profiler.ProfilerActivity.CUDA]
    if mode == "prof":
        activities.insert(0, torch.profiler.ProfilerActivity.CPU)
    prof = torch.profiler.profile(activities=activities)
    prof.start()
    return prof


SCRIPTS = ("matmul-mask", "infer-tiny", "graph-replay")
"""Short scripts timed as whole processes."""
_SCRIPT_LOOPS = {
    "matmul-mask": """
        a = torch.randn(4096, 4096, device=DEVICE)
        for _ in range(40):  # the issue's script: a matmul and a boolean mask, no optimizer
            b = a @ a
            kept = b[b > 0]
        kept.sum().item()
    """,
    "infer-tiny": """
        params = [torch.randn(64, device=DEVICE) for _ in range(200)]
        with torch.no_grad():
            for _ in range(30):
                for p in params:
                    p.mul_(0.999).add_(0.001)
        torch.cuda.synchronize() if DEVICE == "cuda" else None
    """,
    "graph-replay": """
        from programs import program_steps
        it = program_steps("graph-replay", DEVICE)
        for _ in range(80):
            next(it)
        torch.cuda.synchronize()
    """,
}


def script_source(name: str, mode: str, device: str = "cuda") -> str:
    """Python source of the short script ``name`` recorded (or not) as ``mode`` says (plain, cupti, prof,
    prof-cuda). It prints one JSON line: ``total_s`` (from just after ``import torch`` to the end, recording
    included; the device is initialised before), ``import_s`` (importing the recorder), ``start_s`` and
    ``stop_s`` (the recorder's or the profiler's, its trace written), ``intervals``, the recorder's
    ``notes.op_naming`` and its start and stop phases (``phases``, seconds)."""
    loop = textwrap.indent(textwrap.dedent(_SCRIPT_LOOPS[name]).strip(), "    ")
    return (
        textwrap.dedent(
            f"""
            import json, os, sys, tempfile, time
            import torch
            DEVICE, MODE = {device!r}, {mode!r}
            torch.zeros(1, device=DEVICE)  # the device is up in every mode before the clock starts
            t0 = time.perf_counter()
            rec = prof = None
            if MODE == "cupti":
                from collector.recording.api import record
            t_import = time.perf_counter()
            if MODE == "cupti":
                out = os.path.join(tempfile.mkdtemp(), "run.json.gz")
                rec = record("{name}", out, timing="cupti", auto_steps=True)
                rec.start()
            elif MODE.startswith("prof"):
                from programs import profiler
                prof = profiler(MODE)
            t_start = time.perf_counter()

            def main():
            """
        )
        + loop
        + textwrap.dedent(
            """

            main()
            t_loop = time.perf_counter()
            n, naming, phases = 0, {}, {}
            if rec is not None:
                trace = rec.stop()
                n, naming = len(trace.intervals), dict(trace.meta.notes.get("op_naming") or {})
                phases = {**getattr(rec, "start_timings", {}), **getattr(rec, "stop_timings", {})}
            if prof is not None:
                prof.stop()
                n = len(prof.events())
            t1 = time.perf_counter()
            print(json.dumps({"total_s": t1 - t0, "import_s": t_import - t0, "start_s": t_start - t_import,
                              "stop_s": t1 - t_loop, "intervals": n, "op_naming": naming, "phases": phases}))
            """
        )
    )
