"""Record the small torch.profiler GPU traces the Kineto importer is checked against (needs CUDA).

    python3 tests/kineto/make_gpu_trace.py OUTDIR

Writes two files into OUTDIR:

- ``gpu_step.pt.trace.json.gz``: two profiled steps of a loop with a pageable and a pinned host-to-device
  copy, a copy on a side stream, ``loss.item()``, ``nonzero``, a boolean mask, ``torch.cuda.synchronize()``
  and ``.cpu()``, recorded with ``with_stack=True`` and cuda_sync events;
- ``gpu_train.pt.trace.json.gz``: two profiled steps of a small MLP trained with backward and AdamW (the
  backward pass runs on autograd's own thread), without stacks.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def train_step(
    model: torch.nn.Module, pageable: torch.Tensor, pinned: torch.Tensor, side: torch.cuda.Stream
) -> torch.Tensor:
    a = pageable.to("cuda")
    b = pinned.to("cuda", non_blocking=True)
    with torch.cuda.stream(side):
        c = pinned.to("cuda", non_blocking=True)
    torch.cuda.current_stream().wait_stream(side)
    y = model(a) + model(b) + c.sum()
    loss = y.square().mean()
    if loss.item() > 1e30:
        print("diverged")
    hits = (y > 0).nonzero()
    picked = y[y > 0]
    torch.cuda.synchronize()
    back = y.cpu()
    return loss + hits.numel() + picked.numel() + back.numel()


def _gzip(path: str) -> None:
    with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.remove(path)
    print(os.path.basename(path), os.path.getsize(path + ".gz"), "bytes gzipped")


def record_training(out_dir: str) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(torch.randn(64, 512).pin_memory(), torch.randint(0, 10, (64,)).pin_memory()) for _ in range(5)]
    path = os.path.join(out_dir, "gpu_train.pt.trace.json")
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(path),
    ) as prof:
        for x, y in data:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            prof.step()
    _gzip(path)


def main(out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).cuda()
    pageable = torch.randn(256, 1024)
    pinned = torch.randn(256, 1024).pin_memory()
    side = torch.cuda.Stream()
    path = os.path.join(out_dir, "gpu_step.pt.trace.json")
    config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(path),
        with_stack=True,
        experimental_config=config,
    ) as prof:
        for _ in range(5):
            with record_function("train_step"):
                train_step(model, pageable, pinned, side)
            prof.step()
    _gzip(path)
    record_training(out_dir)
    print(torch.__version__, torch.cuda.get_device_name())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
