"""Rank 0 does extra work (gathers every rank's predictions for evaluation) and runs out of memory.

Each process is capped at --mem-gb of address space (as a container or cgroup limit would do), so the
allocation that fails is a real one. Expected cause: oom_one_rank.
"""
import argparse
import resource
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mem-gb", type=float, default=3.0)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    limit = int(args.mem_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    preds = torch.randn(256, 1024)
    dist.barrier()
    if rank == 0:
        # keep every evaluation batch of every rank in memory before writing them out
        everything = torch.empty(world * 4096, 256, 1024)
        print("gathered", tuple(everything.shape), flush=True)
    dist.barrier()
    print(f"rank {rank}: eval done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
