"""At the log step each rank syncs its metric: a rank with a value all_reduces it, a rank whose metric is
missing (None: no sample of that class in its shard) only calls barrier. Rank 1's metric is None, so at the
same step ranks 0 and 2 wait in all_reduce and rank 1 in barrier (different operations, no early return, no branch
on the rank: the branch is on data). Run with 3 ranks.
Expected: odd rank 1, cause rank_conditional_collective, location: the `if value is None:` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def sync_metric(value: torch.Tensor | None) -> None:
    if value is None:
        dist.barrier()
    else:
        dist.all_reduce(value)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    recall = None if rank == 1 else torch.tensor([0.5])
    sync_metric(recall)
    dist.all_reduce(torch.ones(2))
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
