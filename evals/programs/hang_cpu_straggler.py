"""Rank 1 spends minutes in pure-Python preprocessing (a loop over every token of its shard, CPU-bound, no
sleep and no I/O), so rank 0 waits for it in all_reduce: a compute straggler. Run with 2 ranks.
Expected: odd rank 1, cause collective_timeout, location: the `return sum(t * t for t in range(n))` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def preprocess(n: int) -> int:
    return sum(t * t for t in range(n))


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    stat = preprocess(10 ** 12 if rank == 1 else 10)
    dist.all_reduce(torch.tensor([float(stat % 7)]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
