"""The loops of benchmarks/whatif_truth.py: each a training or inference loop written the way its users write
it, built once as it is (``fixed=False``) and once with one fix applied (``fixed=True``).

A loop is a :class:`Loop`: ``run(n)`` runs ``n`` steps and returns the seconds per step of the steps after
the first two, measured on the host with the GPU waited for at both ends (the loop's own pace); ``close()``
frees it. ``steps_marked`` says whether the loop has an optimizer step (the recorder takes step boundaries
there); otherwise ``run`` calls ``on_step`` after each step.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

WARM = 2
"""Steps a timing leaves out at its start."""


def _sync() -> None:
    import torch

    torch.cuda.synchronize()


def _busy(seconds: float) -> None:
    """Host work that holds the GIL, as Python-side preprocessing does."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(200))


@dataclass
class Loop:
    step: Callable[[], None]
    steps_marked: bool = True
    close: Callable[[], None] = field(default=lambda: None)
    warm: int = WARM
    """Steps a timing leaves out (more where a queue of prefetched batches must drain first)."""

    def run(self, n: int, on_step: Callable[[], None] | None = None) -> float:
        t0 = 0.0
        for i in range(n):
            if i == self.warm:
                _sync()
                t0 = time.perf_counter()
            self.step()
            if on_step is not None and not self.steps_marked:
                on_step()
        _sync()
        return (time.perf_counter() - t0) / max(n - self.warm, 1)


@dataclass
class Whole:
    """A loop that a framework runs whole (``trainer.fit``): ``run(n)`` is its median step as the framework's
    own step callbacks time it (the steps after the first WARM)."""

    train: Callable[[int, Callable[[], None]], None]
    steps_marked: bool = True
    close: Callable[[], None] = field(default=lambda: None)

    def run(self, n: int, on_step: Callable[[], None] | None = None) -> float:
        marks: list[float] = []

        def tick() -> None:
            marks.append(time.perf_counter())

        self.train(n, tick)
        _sync()
        if len(marks) <= WARM + 1:
            return float("nan")
        # the median step: a framework's host-bound steps are timed by its own callbacks, and one garbage
        # collection of 250 ms in 150 steps of 6 ms would move their mean by 30% whichever loop it falls in
        return float(np.median(np.diff(marks[WARM:])))


# ----------------------------------------------------------------------------------------- the loops


def hf_trainer(fixed: bool) -> Whole:
    """Hugging Face Trainer on a small GPT-2 (6 x 512, bf16) with random tokens. Fix: no per-step NaN/inf
    check of the loss (``logging_nan_inf_filter=False``), a sync that costs the host ~0.05 ms."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    config = GPT2Config(n_layer=6, n_embd=512, n_head=8, n_positions=256)
    model = GPT2LMHeadModel(config)

    class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 100_000

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = torch.randint(0, config.vocab_size, (256,))
            return {"input_ids": ids, "labels": ids}

    out = tempfile.mkdtemp(prefix="whatif-hf-")

    def train(n: int, tick: Callable[[], None]) -> None:
        class Tick(TrainerCallback):  # type: ignore[misc]
            def on_step_end(self, *args: Any, **kwargs: Any) -> None:
                tick()

        args = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=16,
            max_steps=n,
            bf16=True,
            report_to="none",
            save_strategy="no",
            logging_steps=50,
            disable_tqdm=True,
            dataloader_num_workers=0,
            logging_nan_inf_filter=not fixed,
        )
        Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[Tick()]).train()

    return Whole(train)


@functools.cache
def _mlp_data() -> Any:
    """The rows :func:`lightning_mlp` trains on (200,000 x 512 floats, 400 MB): one dataset for the loop and its
    fixed twin, so that the two differ only by the fix and not by where their rows lie in memory."""
    import torch

    return torch.utils.data.TensorDataset(torch.randn(200_000, 512), torch.randint(0, 10, (200_000,)))


def lightning_mlp(fixed: bool) -> Whole:
    """Lightning ``Trainer.fit`` of an MLP on a ``TensorDataset`` (pageable batches). Fix:
    ``DataLoader(pin_memory=True)``."""
    import torch

    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl  # type: ignore[no-redef]

    class MLP(pl.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(
                torch.nn.Linear(512, 1024),
                torch.nn.ReLU(),
                torch.nn.Linear(1024, 1024),
                torch.nn.ReLU(),
                torch.nn.Linear(1024, 10),
            )

        def training_step(self, batch: Any, idx: int) -> Any:
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    data = _mlp_data()
    model = MLP()

    def train(n: int, tick: Callable[[], None]) -> None:
        class Tick(pl.Callback):  # type: ignore[misc]
            def on_train_batch_end(self, *args: Any, **kwargs: Any) -> None:
                tick()

        loader = torch.utils.data.DataLoader(data, batch_size=512, shuffle=True, pin_memory=fixed)
        trainer = pl.Trainer(
            max_steps=n,
            accelerator="gpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[Tick()],
        )
        trainer.fit(model, loader)

    return Whole(train)


def loader_workers() -> int:
    """The workers the host-bound finding advises for :func:`resnet_loader` on this host: it loads a batch in
    about 6 times the rest of its step, so keeping up at half this process's loading speed takes 12, rounded up
    to 16, at most the host's CPUs less one (15 on a host of 16 CPUs). The pair checks the advice says so."""
    from collector.traceformat.deflate import usable_cpus

    return max(min(16, usable_cpus() - 1), 2)


def resnet_loader(fixed: bool) -> Loop:
    """torchvision ResNet-18 trained on images augmented by the DataLoader in the main process. Fix: the worker
    processes the host-bound finding advises (``num_workers=loader_workers(), persistent_workers=True``), its
    DataLoader fix alone (the batches stay pageable: pinning them is the pageable-copy finding's fix)."""
    import numpy as np
    import torch
    import torchvision
    from PIL import Image
    from torchvision import transforms

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (320, 320, 3), dtype=np.uint8)) for _ in range(64)]
    aug = transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ColorJitter(0.4, 0.4, 0.4),
            transforms.ToTensor(),
            transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
        ]
    )

    class Images(torch.utils.data.Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 1_000_000

        def __getitem__(self, i: int) -> tuple[Any, int]:
            return aug(images[i % len(images)]), i % 1000

    model = torchvision.models.resnet18().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    extra = {"num_workers": loader_workers(), "persistent_workers": True} if fixed else {}
    loader = torch.utils.data.DataLoader(Images(), batch_size=64, shuffle=True, **extra)
    it = iter(loader)

    def step() -> None:
        x, y = next(it)
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def close() -> None:
        nonlocal it
        del it

    # persistent workers refill their queue (2 batches each) while the other loop runs: the fixed loop's first
    # steps come from it, so they are left out of its timing
    return Loop(step, close=close, warm=2 * loader_workers() + 2 if fixed else WARM)


def transformer_item(fixed: bool) -> Loop:
    """GPU-bound: ``TransformerEncoderLayer(1024, 16, 4096)`` on 16 x 512 tokens, AdamW, then the loss read
    with ``.item()`` and 3 ms of host work (logging, metrics) every step. Fix: the loss read every 10 steps."""
    import torch

    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True).cuda()
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
    x = torch.randn(16, 512, 1024, device="cuda")
    count = [0]

    def step() -> None:
        out = layer(x)
        loss = out.float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        count[0] += 1
        if not fixed or count[0] % 10 == 0:
            loss.item()
        _busy(0.003)

    return Loop(step)


def mlp_pageable(fixed: bool) -> Loop:
    """An MLP (6 x 4096) trained on 64 MiB batches copied from pageable memory with a blocking ``.to()``.
    Fix: pinned batches copied with ``non_blocking=True``."""
    import torch

    layers: list[Any] = []
    for _ in range(5):
        layers += [torch.nn.Linear(4096, 4096), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(4096, 4096)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    xs = [torch.rand(4096, 4096, pin_memory=fixed) for _ in range(2)]
    ys = [torch.randint(0, 4096, (4096,), pin_memory=fixed) for _ in range(2)]
    count = [0]

    def step() -> None:
        i = count[0] % 2
        count[0] += 1
        x, y = xs[i].to("cuda", non_blocking=fixed), ys[i].to("cuda", non_blocking=fixed)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return Loop(step)


def inference_item(fixed: bool) -> Loop:
    """Inference: torchvision ResNet-50 in eval mode on batches of 128, accuracy counted with ``.item()`` per
    batch and 2 ms of host post-processing. Fix: the count kept on the GPU and read at the end."""
    import torch
    import torchvision

    model = torchvision.models.resnet50().cuda().eval().to(memory_format=torch.channels_last)
    x = torch.randn(128, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (128,), device="cuda")
    correct = torch.zeros((), device="cuda", dtype=torch.long)
    total = [0]

    def step() -> None:
        nonlocal correct
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            hit = (model(x).argmax(1) == y).sum()
        if fixed:
            correct += hit
        else:
            total[0] += int(hit.item())
        _busy(0.002)

    return Loop(step, steps_marked=False)


def tiny_ops_graph(fixed: bool) -> Loop:
    """Launch-bound: 200 small tensors updated in place (400 ~1 us kernels a step). Fix: the step captured
    once as a CUDA graph and replayed."""
    import torch

    ts = [torch.zeros(64, device="cuda") for _ in range(200)]

    def body() -> None:
        for t in ts:
            t.mul_(0.999).add_(0.001)

    if not fixed:
        return Loop(body, steps_marked=False)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    return Loop(graph.replay, steps_marked=False)


@dataclass(frozen=True)
class Pair:
    """A loop and one fix: the finding whose fix it is (``rule``, ``option`` for a finding with several
    fixes), steps per timing, and whether the fix is expected to pay."""

    name: str
    make: Callable[[bool], Loop | Whole]
    rule: str
    fix: str
    steps: int = 40
    option: str = ""
    advice: str = ""
    """Words the fix's option label must hold for the applied fix to be the advised one (e.g. its worker count)."""
    alternations: int = 1
    """Fixed/base timings alternated per round (whatif_truth.run_pair): more for a loop whose plain pace moves
    from one timing to the next by more than the bound (a framework's host-bound loop)."""


PAIRS = (
    Pair("hf-trainer-gpt2", hf_trainer, "sync-in-loop", "logging_nan_inf_filter=False", 40, alternations=3),
    Pair("lightning-mlp", lightning_mlp, "pageable-copy", "DataLoader(pin_memory=True)", 150, alternations=5),
    Pair(
        "resnet18-dataloader",
        resnet_loader,
        "host-bound",
        f"num_workers={loader_workers()}",
        2 * loader_workers() + 20,
        "DataLoader",
        f"num_workers={loader_workers()})",
    ),
    Pair("transformer-item", transformer_item, "sync-in-loop", "loss.item() every 10 steps", 40),
    Pair("mlp-pageable", mlp_pageable, "pageable-copy", "pinned + non_blocking batches", 30),
    Pair("inference-item", inference_item, "sync-in-loop", "accuracy kept on the GPU", 40),
    Pair("tiny-ops-graph", tiny_ops_graph, "host-bound", "the step as a CUDA graph", 100, "CUDA graphs"),
)

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
