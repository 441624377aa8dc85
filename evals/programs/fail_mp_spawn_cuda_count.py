"""Start one worker per GPU with mp.spawn(nprocs=torch.cuda.device_count()): on a CPU machine that is zero workers.

Expected cause: single_process_launch (the program exits 0 having trained nothing).
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank: int, world_size: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    dist.init_process_group("gloo", rank=rank, world_size=world_size, timeout=timedelta(seconds=10))
    print(f"worker {rank}/{world_size} training", flush=True)
    dist.destroy_process_group()


def main() -> None:
    world_size = torch.cuda.device_count()
    print(f"spawning {world_size} workers", flush=True)
    mp.spawn(worker, args=(world_size,), nprocs=world_size, join=True)
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
