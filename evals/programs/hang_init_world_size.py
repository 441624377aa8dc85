"""Every rank passes init_process_group a world size one larger than the job (it counts a head node that runs no
worker): the ranks finish the rendezvous and wait in the backend's start-up for a rank that never comes. Run with
2 ranks. Expected: odd rank 2 (absent), cause store_barrier_world_size, location: the init_process_group line.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"]) + 1  # nodes x GPUs from the cluster file, head node included
    dist.init_process_group("gloo", rank=rank, world_size=world)
    total = torch.ones(1)
    dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
