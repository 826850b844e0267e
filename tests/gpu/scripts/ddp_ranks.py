"""DDP, rank 1 sleeping 20 ms per step (planted). ``gloo``: both ranks share GPU 0 (NCCL refuses that) and gloo
moves CUDA tensors through host memory; ``nccl``: one GPU per rank."""

import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

backend = sys.argv[1] if len(sys.argv) > 1 else "gloo"
dist.init_process_group(backend)
rank = dist.get_rank()
device = 0 if backend == "gloo" else rank
torch.cuda.set_device(device)
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 512)).cuda()
model = DistributedDataParallel(net, device_ids=[device])
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
