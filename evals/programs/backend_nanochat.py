"""Broken on CPU: a nanochat style compute_init that only forms a process group on CUDA.

Run: torchrun --standalone --nproc_per_node=2 backend_nanochat.py
On a machine without CUDA the CPU run never calls init_process_group, so the first collective fails
with "Default process group has not been initialized"; patched by gloo_backend (adds the CPU branch).
Gradients are averaged by hand, as nanochat's optimizer does, not by DDP.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn


def get_dist_info():
    if all(k in os.environ for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")):
        return True, int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    return False, 0, 0, 1


def autodetect_device_type():
    return "cuda" if torch.cuda.is_available() else "cpu"


def compute_init(device_type="cuda"):
    """Seed, pick the device, and start the process group when launched by torchrun."""
    assert device_type in ("cuda", "cpu"), "unsupported device type"
    if device_type == "cuda":
        assert torch.cuda.is_available(), "device_type is cuda but this torch has no CUDA"
    torch.manual_seed(42)
    is_ddp_requested, ddp_rank, ddp_local_rank, ddp_world_size = get_dist_info()
    if is_ddp_requested and device_type == "cuda":
        device = torch.device("cuda", ddp_local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl", device_id=device, timeout=timedelta(seconds=60))
        dist.barrier()
    else:
        device = torch.device(device_type)
    return is_ddp_requested, ddp_rank, ddp_local_rank, ddp_world_size, device


def main():
    ddp, rank, local_rank, world_size, device = compute_init(autodetect_device_type())
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1)).to(device)
    gen = torch.Generator().manual_seed(7 + rank)
    for step in range(4):
        x = torch.randn(16, 6, generator=gen).to(device)
        loss = (model(x) - x.sum(dim=1, keepdim=True)).pow(2).mean()
        model.zero_grad(set_to_none=True)
        loss.backward()
        for p in model.parameters():  # the optimizer's own gradient averaging
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= world_size
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.05 * p.grad
        if rank == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    if ddp:
        dist.barrier()  # no rank tears gloo down while a peer still talks to it
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
