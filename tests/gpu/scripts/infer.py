"""Inference loop, no optimizer and no step marker: a .cpu() every iteration (planted), model to GPU at set-up."""

import torch
from torch import nn

net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10)).cuda()
data = [torch.randn(512, 1024).pin_memory() for _ in range(4)]
preds = []
with torch.no_grad():
    for i in range(60):
        out = net(data[i % 4].cuda(non_blocking=True))
        preds.append(out.argmax(1).cpu().numpy())  # planted
print(len(preds))
