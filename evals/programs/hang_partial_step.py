"""The step function is bound once with functools.partial; its `sync` flag is meant to be off only for gradient
accumulation, but it is computed per rank from the rank's own micro-batch count, which is 1 on rank 1: rank 1's
step skips the all_reduce and rank 1 waits in the end-of-epoch barrier while ranks 0 and 2 wait in the step's
all_reduce. 3 ranks.
Expected: odd rank 1, cause rank_conditional_collective, location: the `if sync:` line."""
import functools
from datetime import timedelta

import torch
import torch.distributed as dist


def train_step(batch: torch.Tensor, sync: bool) -> None:
    grad = batch.mean(0)
    if sync:
        dist.all_reduce(grad)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    micro_batches = 1 if rank == 1 else 2
    step = functools.partial(train_step, sync=micro_batches > 1)
    step(torch.ones(4, 3))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
