"""Rank 1 has no shard left, so it leaves early and exits 0; an upload helper it forked keeps its sockets
open, so rank 0 never hears that it left and waits in all_reduce forever. Run with 2 ranks.
Expected: odd rank 1 (gone), cause peer_died_first, location: rank 0's `dist.all_reduce(total)` line.
"""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def start_uploader() -> None:
    job = os.getppid()  # the launcher: upload while the job runs
    if os.fork() == 0:  # background upload of finished shards
        while os.path.exists(f"/proc/{job}"):
            time.sleep(0.5)
        os._exit(0)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    shards = list(range(1))[rank::world]
    start_uploader()
    if not shards:
        print(f"rank {rank}: nothing to do", flush=True)
        sys.exit(0)
    total = torch.tensor([float(sum(shards))])
    dist.all_reduce(total)
    print(f"rank {rank}: total {total.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
