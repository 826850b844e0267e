"""Loop of boolean-mask indexing, no optimizer: y[y > 0] syncs every iteration (planted) while the host then
waits for its next batch."""

import time

import torch


def next_batch():
    time.sleep(0.003)  # stands in for a data loader handing over the next batch
    return w


x = torch.randn(1 << 24, device="cuda")
w = torch.randn(1 << 24, device="cuda")
total = torch.zeros((), device="cuda")
for i in range(40):
    y = torch.tanh(x * next_batch() + i)
    for _ in range(150):
        y = y * 1.0001 + 0.0001
    sel = y[y > 0]  # planted
    total += sel.sum()
print(float(total))
