"""Closed-loop program for peer_died_first: rank 1 fails first, rank 0 only echoes it.

Each rank trains on its own data shard. With the default `--shards 1` the shard list is built for one
process, so rank 1 raises IndexError at its first step while rank 0 is already waiting in all_reduce;
rank 0 then reports the gloo "Connection closed by peer" echo. The fix is the FIRST failure's: one shard
per rank (`--shards 2`, i.e. the world size). Every rank prints `DISTDOCTOR_OK rank=<r> checksum=<x>`
when it finishes.
"""
import argparse
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def make_shards(n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(16, 8, generator=g) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shards", type=int, default=1, help="number of data shards (must be >= world size)")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    shards = make_shards(args.shards)
    for step in range(args.steps):
        if rank == 1 and step == 0:
            time.sleep(0.3)  # rank 0 is already inside all_reduce when rank 1 fails, as in real jobs
        x = shards[rank]  # IndexError on rank 1 when --shards is smaller than the world size
        loss = model(x).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    checksum = sum(float(p.detach().sum()) for p in model.parameters())
    dist.destroy_process_group()
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum:.6f}", flush=True)


if __name__ == "__main__":
    main()
