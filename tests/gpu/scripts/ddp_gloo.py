"""DDP over gloo with CUDA tensors: two ranks share one GPU (NCCL refuses that), rank 1 sleeps 20 ms per step."""

import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.cuda.set_device(0)
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512)).cuda()
model = DistributedDataParallel(net, device_ids=[0])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 512, device="cuda")
for _ in range(20):
    if rank == 1:
        time.sleep(0.02)  # planted
    opt.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    opt.step()
torch.cuda.synchronize()
dist.barrier()
