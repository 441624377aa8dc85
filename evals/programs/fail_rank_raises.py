"""One rank raises a ValueError in its training step while the others wait in all_reduce.

Expected cause: peer_died_first (the failing rank is --bad-rank; the others only echo it).
"""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bad-rank", type=int, default=1)
    parser.add_argument("--bad-step", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    model = torch.nn.Linear(8, 1)
    for step in range(args.steps):
        loss = model(torch.randn(4, 8)).pow(2).mean()
        if rank == args.bad_rank and step == args.bad_step:
            raise ValueError(f"bad batch at step {step}: labels contain NaN")
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
