"""Built-in demo loops: small, real training loops (an MLP and SGD on synthetic data) that teach one lesson each.

Each demo is a generator: it sets up, then runs one training step per ``next()`` forever. The runner
(:func:`run_demo`) takes warm-up steps unrecorded, then records ``steps`` steps with a step mark after each
and prints steps/s. Sizes scale with the GPU's memory (about 1-3 s per demo on an H200).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Demo:
    name: str
    summary: str  # one line for ``streamscope demos``
    teaches: str  # what to look for in the trace
    loop: Callable[[DemoContext], Generator[None, None, None]]
    steps: int = 100


@dataclass
class DemoContext:
    """What a demo loop needs: sizes, and a way to name streams when recording."""

    batch: int
    width: int
    depth: int
    name_stream: Callable[[Any, str], None] = lambda stream, label: None
    blocking_steps: int = 0  # d2h: steps (counting warm-up) that use the blocking variant


def sizes(total_memory: int) -> tuple[int, int, int]:
    """``(batch rows, width, depth)`` for a GPU with ``total_memory`` bytes: 64 MiB batches on large GPUs."""
    gib = total_memory / 1024**3
    if gib >= 60:
        return 4096, 4096, 6
    if gib >= 16:
        return 2048, 2048, 6
    return 512, 1024, 4


def _host_prep(step: int) -> np.ndarray:
    """About a millisecond of host work per step, as a real input pipeline does (shuffling indices)."""
    return np.random.default_rng(step).permutation(100_000)


def _setup(
    ctx: DemoContext, pinned: bool, pool: int = 2
) -> tuple[Any, Any, Callable[[Any, Any], Any], list[Any], list[Any]]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    layers: list[Any] = []
    for _ in range(ctx.depth - 1):
        layers += [torch.nn.Linear(ctx.width, ctx.width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(ctx.width, ctx.width))
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(0)
    xs = [torch.rand(ctx.batch, ctx.width, generator=gen, pin_memory=pinned) for _ in range(pool)]
    ys = [torch.randint(0, ctx.width, (ctx.batch,), generator=gen, pin_memory=pinned) for _ in range(pool)]

    def train_step(x: Any, y: Any) -> Any:
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()
        opt.step()
        return loss

    return model, opt, train_step, xs, ys


def naive(ctx: DemoContext) -> Generator[None, None, None]:
    """Pageable batches, blocking copies, ``loss.item()`` every step, one stream."""
    _, _, train_step, xs, ys = _setup(ctx, pinned=False)
    total = 0.0
    i = 0
    while True:
        _host_prep(i)
        x = xs[i % len(xs)].to("cuda")
        y = ys[i % len(ys)].to("cuda")
        loss = train_step(x, y)
        total += loss.item()
        i += 1
        yield


def pinned(ctx: DemoContext) -> Generator[None, None, None]:
    """Pinned batches copied with ``non_blocking=True``; no per-step sync; one stream."""
    _, _, train_step, xs, ys = _setup(ctx, pinned=True)
    i = 0
    while True:
        _host_prep(i)
        x = xs[i % len(xs)].to("cuda", non_blocking=True)
        y = ys[i % len(ys)].to("cuda", non_blocking=True)
        train_step(x, y)
        i += 1
        yield


def overlap(ctx: DemoContext) -> Generator[None, None, None]:
    """Batch N+1 copied on a transfer stream while batch N computes; ordered with wait_stream/record_stream."""
    import torch

    _, _, train_step, xs, ys = _setup(ctx, pinned=True)
    copy_stream = torch.cuda.Stream()
    ctx.name_stream(copy_stream, "prefetch")

    def prefetch(i: int) -> tuple[Any, Any]:
        with torch.cuda.stream(copy_stream):
            return (
                xs[i % len(xs)].to("cuda", non_blocking=True),
                ys[i % len(ys)].to("cuda", non_blocking=True),
            )

    nxt = prefetch(0)
    i = 0
    while True:
        _host_prep(i)
        compute = torch.cuda.current_stream()
        compute.wait_stream(copy_stream)
        x, y = nxt
        x.record_stream(compute)
        y.record_stream(compute)
        nxt = prefetch(i + 1)
        train_step(x, y)
        i += 1
        yield


def sync_trap(ctx: DemoContext) -> Generator[None, None, None]:
    """The pinned loop plus ``print(loss)`` and ``if loss.item() < best:``: each one stalls the host."""
    _, _, train_step, xs, ys = _setup(ctx, pinned=True)
    best = float("inf")
    i = 0
    while True:
        _host_prep(i)
        x = xs[i % len(xs)].to("cuda", non_blocking=True)
        y = ys[i % len(ys)].to("cuda", non_blocking=True)
        loss = train_step(x, y)
        if i % 10 == 0:
            print(f"step {i}: loss", loss)  # sync: formats a CUDA tensor
        if loss.item() < best:  # sync: .item() waits for the step to finish
            best = loss.item()
        i += 1
        yield


def d2h(ctx: DemoContext) -> Generator[None, None, None]:
    """Results (the last layer's output) brought back every step: first half blocking ``.cpu()``,
    second half ``non_blocking`` copies into pinned buffers on a side stream, read two steps later."""
    import torch

    model, _, train_step, xs, ys = _setup(ctx, pinned=True)
    d2h_stream = torch.cuda.Stream()
    ctx.name_stream(d2h_stream, "results")
    slots = 2
    bufs = [torch.empty(ctx.batch, ctx.width, pin_memory=True) for _ in range(slots)]
    done: list[Any] = [None] * slots
    checksum = 0.0
    i = 0
    while True:
        _host_prep(i)
        x = xs[i % len(xs)].to("cuda", non_blocking=True)
        y = ys[i % len(ys)].to("cuda", non_blocking=True)
        train_step(x, y)
        with torch.no_grad():
            out = model(x)
        if i < ctx.blocking_steps:
            with torch.profiler.record_function("results: blocking .cpu()"):
                host = out.cpu()  # pageable destination: the host waits for the step and the copy
                checksum += float(host[0, 0])
        else:
            with torch.profiler.record_function("results: non_blocking into pinned"):
                k = i % slots
                if done[k] is not None:
                    done[k].synchronize()  # waits only while the host runs two steps ahead of the GPU
                    checksum += float(bufs[k][0, 0])
                d2h_stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(d2h_stream):
                    bufs[k].copy_(out, non_blocking=True)
                    done[k] = torch.cuda.Event()
                    done[k].record(d2h_stream)
                out.record_stream(d2h_stream)
        i += 1
        yield


# --- regimes: ordinary loops at the scales where timing is hardest (the recorder's benchmarks use these) ----


def tiny_ops(ctx: DemoContext) -> Generator[None, None, None]:
    """Launch-bound: 200 tensors of 64 floats, ``p.mul_(0.999).add_(0.001)`` each (400 ~1 us kernels)."""
    import torch

    params = [torch.randn(64, device="cuda") for _ in range(200)]
    while True:
        for p in params:
            p.mul_(0.999).add_(0.001)
        yield


def small_convnet() -> Any:
    """Two 3x3 convolutions of 64 channels, pooled, and a linear layer to 10 classes (on the CPU)."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(64, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )


def convnet(ctx: DemoContext) -> Generator[None, None, None]:
    """GPU-bound: 2 conv 3x3 (64 channels), batch 128 of 64x64, pinned ``non_blocking`` batches, SGD."""
    import torch
    from torch import nn

    net = small_convnet().cuda()
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(128, 3, 64, 64, generator=gen).pin_memory() for _ in range(2)]
    ys = [torch.randint(0, 10, (128,), generator=gen).pin_memory() for _ in range(2)]
    i = 0
    while True:
        x = xs[i % 2].to("cuda", non_blocking=True)
        y = ys[i % 2].to("cuda", non_blocking=True)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        i += 1
        yield


def _transformer(d_model: int, heads: int, ff: int, batch: int, seq: int) -> Generator[None, None, None]:
    import torch

    layer = torch.nn.TransformerEncoderLayer(d_model, heads, ff, batch_first=True).cuda()
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
    x = torch.randn(batch, seq, d_model, device="cuda")
    while True:
        opt.zero_grad(set_to_none=True)
        layer(x).pow(2).mean().backward()
        opt.step()
        yield


def transformer_small(ctx: DemoContext) -> Generator[None, None, None]:
    """Host-bound: ``TransformerEncoderLayer(256, 4, 1024)``, batch 8x128, AdamW."""
    return _transformer(256, 4, 1024, 8, 128)


def transformer_large(ctx: DemoContext) -> Generator[None, None, None]:
    """GPU-bound: ``TransformerEncoderLayer(1024, 16, 4096)``, batch 16x512, AdamW."""
    return _transformer(1024, 16, 4096, 16, 512)


DEMOS: dict[str, Demo] = {
    d.name: d
    for d in (
        Demo(
            "naive",
            "pageable batches, blocking copies, loss.item() every step, one stream",
            "copies block the host and serialize with compute; the GPU idles during every copy and sync",
            naive,
        ),
        Demo(
            "pinned",
            "pinned batches with non_blocking=True, no per-step sync, one stream",
            "pinned copies run ~6.5x faster on an H200 and the host runs ahead; copies still queue behind compute",
            pinned,
            steps=150,
        ),
        Demo(
            "overlap",
            "next batch copied on a transfer stream while this one computes",
            "copies on their own stream hide under compute: the step is as long as compute alone",
            overlap,
            steps=150,
        ),
        Demo(
            "sync-trap",
            "a good loop with print(loss) and `if loss.item() < best:` inside",
            "each print/item waits for the GPU: the host can no longer run ahead, so host work and launch "
            "gaps add to every step (the sync_wait intervals point at the two lines)",
            sync_trap,
            steps=150,
        ),
        Demo(
            "d2h",
            "results copied back every step: blocking .cpu() then non_blocking into pinned buffers",
            "a blocking .cpu() stalls the host on a slow pageable copy; non_blocking copies into pinned "
            "buffers on a side stream cost almost nothing",
            d2h,
            steps=60,
        ),
        Demo(
            "tiny-ops",
            "launch-bound: 200 tiny tensors updated in place, 400 ~1 us kernels a step",
            "the GPU is busy a few percent of the step: the host cannot launch kernels as fast as they run",
            tiny_ops,
            steps=100,
        ),
        Demo(
            "convnet",
            "GPU-bound conv net (2 conv 3x3, 64 channels, batch 128 of 64x64), pinned batches, SGD",
            "the GPU stays busy; the batch copies run on the compute stream, in line with the kernels",
            convnet,
            steps=100,
        ),
        Demo(
            "transformer-small",
            "host-bound TransformerEncoderLayer(256, 4, 1024), batch 8x128, AdamW",
            "small kernels: the GPU waits for the host between launches most of the step",
            transformer_small,
            steps=100,
        ),
        Demo(
            "transformer-large",
            "GPU-bound TransformerEncoderLayer(1024, 16, 4096), batch 16x512, AdamW",
            "large kernels on a full queue: the host runs ahead and the GPU never waits",
            transformer_large,
            steps=50,
        ),
    )
}


def _ddp(ctx: DemoContext) -> Generator[None, None, None]:
    """DistributedDataParallel without a planted straggler (collector.demos.ddp has the options)."""
    from collector.demos.ddp import Plant, ddp_loop

    return ddp_loop(Plant())


DEMOS["ddp"] = Demo(
    "ddp",
    "DistributedDataParallel on an MLP, every rank (--nproc N; --slow-rank R --delay-ms D --slow-cause C)",
    "ranks meet in all-reduces during backward: a slow rank makes every other rank wait in the collective; "
    "the straggler finding names it, its cause and what it costs per step",
    _ddp,
    steps=40,
)


def describe() -> list[str]:
    """One line per demo: ``name  summary``."""
    width = max(len(n) for n in DEMOS)
    return [f"{d.name:<{width}}  {d.summary}" for d in DEMOS.values()]


def get(name: str) -> Demo:
    """The demo called ``name``; ValueError listing the demos otherwise."""
    if name not in DEMOS:
        raise ValueError(f"unknown demo {name!r}; the demos are: {', '.join(DEMOS)}")
    return DEMOS[name]


def run_demo(
    name: str,
    recorder: Any = None,
    steps: int | None = None,
    warmup: int = 3,
    quiet: bool = False,
    times: list[float] | None = None,
    plant: Any = None,
) -> float:
    """Run demo ``name``: ``warmup`` unrecorded steps, then ``steps`` steps (recorded when ``recorder`` is a
    not-yet-started Recorder, which is started and stopped here). Returns ms per step (wall time, GPU
    finished), printed as steps/s unless ``quiet``. ``times`` receives ``time.perf_counter()`` at the start,
    after each step and once the GPU has finished (``steps + 2`` values). ``plant``: the ddp demo's straggler
    (collector.demos.ddp.Plant)."""
    import torch

    demo = get(name)
    n = int(steps or demo.steps)
    if n < 1:
        raise ValueError(f"steps must be at least 1, got {n}")
    if name == "ddp":
        from collector.demos.ddp import Plant, run_ddp

        return run_ddp(recorder, n, warmup, plant or Plant(), quiet, times)
    batch, width, depth = sizes(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    names: list[tuple[Any, str]] = []
    ctx = DemoContext(batch, width, depth, lambda stream, label: names.append((stream, label)), warmup + n // 2)
    loop = demo.loop(ctx)
    for _ in range(warmup):
        next(loop)
    torch.cuda.synchronize()
    if recorder is not None:
        recorder.start()
        for stream, label in names:
            recorder.name_stream(stream, label)
        ctx.name_stream = recorder.name_stream
    marks = times if times is not None else []
    t0 = time.perf_counter()
    marks.append(t0)
    for _ in range(n):
        next(loop)
        if recorder is not None:
            recorder.step()
        marks.append(time.perf_counter())
    sync = getattr(torch.cuda.synchronize, "__wrapped__", torch.cuda.synchronize)
    sync()
    marks.append(time.perf_counter())
    ms = (marks[-1] - t0) * 1e3 / n
    if recorder is not None:
        recorder.stop()
    loop.close()
    if not quiet:
        print(f"demo {name}: {n} steps, {1e3 / ms:.1f} steps/s ({ms:.2f} ms/step)", flush=True)
    return ms
