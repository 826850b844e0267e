"""The ``ddp`` demo: DistributedDataParallel on a small MLP, with an optional straggler planted on one rank.

Run it on every rank of a job: ``streamscope record --nproc 2 demo:ddp --slow-rank 1 --delay-ms 20
--slow-cause data``. NCCL on GPUs (each rank on ``cuda:LOCAL_RANK``), gloo on CPUs. Outside a launched job it
runs as a world of one. Each step reads a batch from a ``DataLoader``, runs forward and backward (DDP
all-reduces the gradients in buckets during backward) and an SGD step.

The planted straggler spends ``delay_ms`` more per step on rank ``slow_rank``, in one of three ways that a
profile tells apart in PyTorch terms:

- ``data``: the dataset's ``__getitem__`` is slow (time inside ``enumerate(DataLoader)#...``);
- ``compute``: extra matrix products before the forward pass (more ``aten::mm`` / kernel time);
- ``sync``: the host waits for the GPU (``torch.cuda.synchronize()`` after a ``delay_ms`` kernel); GPUs only.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

CAUSES = ("data", "compute", "sync")
"""What the planted straggler spends its extra time on."""


@dataclass(frozen=True)
class Plant:
    """A straggler to plant: rank ``rank`` (-1: none) spends ``delay_ms`` more per step on ``cause``."""

    rank: int = -1
    delay_ms: float = 0.0
    cause: str = "data"

    def check(self, cuda: bool) -> None:
        """Raise ValueError (one line) for a plant this machine cannot run."""
        if self.cause not in CAUSES:
            raise ValueError(f"--slow-cause must be one of {', '.join(CAUSES)}, got {self.cause!r}")
        if self.delay_ms < 0:
            raise ValueError(f"--delay-ms must not be negative, got {self.delay_ms}")
        if self.rank >= 0 and self.cause == "sync" and not cuda:
            raise ValueError("--slow-cause sync needs CUDA: a CPU rank has no device to wait for")


def _sizes(cuda: bool) -> tuple[int, int, int]:
    """(batch rows, width, depth): a few ms per step on either device."""
    return (2048, 2048, 6) if cuda else (64, 256, 4)


class _Batches:
    """An endless map-style dataset of ready batches; slow on the planted rank when the cause is data."""

    def __init__(self, torch: Any, batch: int, width: int, delay_s: float) -> None:
        gen = torch.Generator().manual_seed(0)
        self.xs = [torch.rand(batch, width, generator=gen) for _ in range(2)]
        self.ys = [torch.randint(0, width, (batch,), generator=gen) for _ in range(2)]
        self.delay_s = delay_s

    def __len__(self) -> int:
        return 1 << 30

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow decode or a slow disk on this rank
        return self.xs[i % 2], self.ys[i % 2]


def setup_process_group(torch: Any) -> tuple[int, int, bool]:
    """Join the launcher's process group (or make a world of one); (rank, world size, created here)."""
    import os

    import torch.distributed as dist

    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), False
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if os.environ.get("WORLD_SIZE"):
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0") or 0))
        dist.init_process_group(backend)
    else:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    return dist.get_rank(), dist.get_world_size(), True


def _calibrated_reps(torch: Any, a: Any, delay_s: float, cuda: bool) -> int:
    """How many ``a @ a`` products take about ``delay_s``."""
    for _ in range(3):
        a @ a
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ a
    if cuda:
        torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / 10
    return max(1, round(delay_s / per)) if delay_s > 0 else 0


def ddp_loop(plant: Plant) -> Generator[None, None, None]:
    """One training step per ``next()``; joins (or makes) the process group first."""
    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader

    cuda = torch.cuda.is_available()
    plant.check(cuda)
    rank, _, _ = setup_process_group(torch)
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    batch, width, depth = _sizes(cuda)
    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(width, width))
    model = DistributedDataParallel(
        torch.nn.Sequential(*layers).to(device), device_ids=[device.index] if cuda else None
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    slow = rank == plant.rank and plant.delay_ms > 0
    delay_s = plant.delay_ms / 1e3 if slow else 0.0
    data: Any = DataLoader(
        _Batches(  # type: ignore[arg-type]
            torch, batch, width, delay_s if plant.cause == "data" else 0.0
        ),
        batch_size=None,
    )
    extra = torch.rand(width, width, device=device)
    reps = _calibrated_reps(torch, extra, delay_s, cuda) if plant.cause == "compute" and cuda else 0
    busy_s = delay_s if plant.cause == "compute" and not cuda else 0.0
    sleep_cycles = _sleep_cycles(torch, delay_s) if plant.cause == "sync" and slow else 0
    for x, y in data:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        for _ in range(reps):
            extra = torch.tanh(extra @ extra)  # more compute on this rank than on the others
        until = time.perf_counter() + busy_s  # a CPU rank computes for the planted time itself: a count of
        while time.perf_counter() < until:  # products calibrated at start drifts with the host's load
            extra = torch.tanh(extra @ extra)
        if sleep_cycles:
            torch.cuda._sleep(sleep_cycles)
            torch.cuda.synchronize()  # the host waits for the device, then issues the step
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        yield


def _sleep_cycles(torch: Any, delay_s: float) -> int:
    """GPU clock cycles of ``torch.cuda._sleep`` that take about ``delay_s``."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(10_000_000)
    torch.cuda.synchronize()
    per_cycle = (time.perf_counter() - t0) / 10_000_000
    return max(1, round(delay_s / per_cycle))


def run_ddp(
    recorder: Any = None,
    steps: int = 40,
    warmup: int = 3,
    plant: Plant = Plant(),
    quiet: bool = False,
    times: list[float] | None = None,
) -> float:
    """Run the ddp demo on this rank: ``warmup`` unrecorded steps, a barrier (the first clock anchor of every
    rank's recording), then ``steps`` recorded steps. Returns ms per step (wall time, device finished)."""
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    plant.check(cuda)
    owned = not dist.is_initialized()
    loop = ddp_loop(plant)
    for _ in range(max(warmup, 1)):  # the first step joins the process group
        next(loop)
    if cuda:
        torch.cuda.synchronize()
    if recorder is not None:
        recorder.start()
    dist.barrier()
    marks = times if times is not None else []
    t0 = time.perf_counter()
    marks.append(t0)
    for _ in range(steps):
        next(loop)
        if recorder is not None:
            recorder.step()
        marks.append(time.perf_counter())
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    marks.append(time.perf_counter())
    ms = (marks[-1] - t0) * 1e3 / steps
    if recorder is not None:
        recorder.stop()
    loop.close()
    if not quiet:
        print(f"demo ddp rank {dist.get_rank()}: {steps} steps, {ms:.2f} ms/step", flush=True)
    if owned:
        dist.destroy_process_group()
    return ms
