"""Training with a hand-written SGD update, no optimizer: loss.item() every iteration (planted) while the host then
waits for its next batch."""

import time

import torch
from torch import nn


def next_batch():
    time.sleep(0.003)  # stands in for a data loader handing over the next batch
    return batch


model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
batch = torch.randn(2048, 1024).pin_memory()
for _ in range(40):
    x = next_batch().cuda(non_blocking=True)
    loss = model(x).pow(2).mean()
    model.zero_grad(set_to_none=True)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 1e-3 * p.grad
    if loss.item() > 1e9:  # planted
        break
