"""Rank 0 alone all_reduces a metric for logging; the other ranks never join that collective.

Expected cause: rank_conditional_collective.
"""
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
    rank = dist.get_rank()
    loss = torch.tensor([float(rank + 1)])
    print(f"rank {rank}: training done", flush=True)
    if rank == 0:
        dist.all_reduce(loss)  # only rank 0 gets here
        print(f"mean loss {loss.item() / dist.get_world_size():.3f}", flush=True)
    else:
        time.sleep(12)  # the other ranks go on with work that is not a collective
    print(f"rank {rank}: exiting", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
