"""Rank 1's local loss is NaN at step 1 and it skips the step (`continue`) before the gradient all-reduce.

Rank 0 waits in that all-reduce; rank 1 goes on to the next step's all-reduce, so the ranks pair different
steps, and at the end rank 0 waits for a step rank 1 never runs: a timeout. Checker: DD102.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=3))
    rank = dist.get_rank()
    for step in range(3):
        loss = torch.tensor([float("nan") if (rank == 1 and step == 1) else 1.0])
        if torch.isnan(loss).any():
            continue  # skip the bad batch: on this rank only
        dist.all_reduce(loss)
    dist.barrier()
    print(f"DISTDOCTOR_OK rank={rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
