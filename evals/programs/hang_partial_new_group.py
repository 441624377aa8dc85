"""Only rank 0 builds the evaluation group (dist.new_group, which every rank of the job must call), so rank 0
waits in new_group for rank 1, and rank 1 has gone on to the training all_reduce. Run with 2 ranks.
Expected: odd rank 0, cause rank_conditional_collective, location: the `if rank == 0:` line.
The shape, in a public thread: https://github.com/pytorch/pytorch/issues/25390 """
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    if rank == 0:
        eval_group = dist.new_group([0, 1])
        dist.barrier(group=eval_group)
    dist.all_reduce(torch.ones(4))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
