"""A small DDP training script written for GPU nodes, as many are: it breaks on a machine without CUDA.

    torchrun --standalone --nproc_per_node=2 examples/broken_ddp/train.py

fails on a CPU-only torch (first `torch.cuda.set_device`: "module 'torch._C' has no attribute
'_cuda_setDevice'", then NCCL: "Distributed package doesn't have NCCL built in"). Fix it with
`python scripts/patch_backend.py examples/broken_ddp` (or see it done on a copy: `python scripts/demo.py`).
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def setup():
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", timeout=timedelta(seconds=60))
    return device


def main():
    device = setup()
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    model = DDP(model, device_ids=[device.index], output_device=device.index)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for step in range(5):
        x = torch.randn(32, 4, generator=gen).to(device)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    dist.barrier()  # no rank tears gloo down while a peer still talks to it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
