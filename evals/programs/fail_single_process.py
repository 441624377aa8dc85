"""A DDP-capable training script that falls back to one process when RANK is not set (nanoGPT style).

Started with `python fail_single_process.py` instead of torchrun, it trains happily on one process:
expected cause single_process_launch (nothing fails; the log only shows world size 1).
"""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        dist.init_process_group("gloo", timeout=timedelta(seconds=10))
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        rank, world = 0, 1
    print(f"ddp={ddp} rank={rank} world_size={world}", flush=True)
    model = torch.nn.Linear(64, 64)
    if ddp:
        model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        t0 = time.time()
        opt.zero_grad()
        loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        opt.step()
        tokens = 32 * world
        print(f"step {step} loss {loss.item():.4f} tok/s {tokens / max(time.time() - t0, 1e-6):.0f}", flush=True)
    if ddp:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
