"""The step function returns early when its batch is empty (a filter dropped every sample), before the gradient
all_reduce: on rank 1 the batch is empty, so rank 1 goes on to the end-of-epoch barrier while ranks 0 and 2 wait
in the step's all_reduce. The test is on data, not on the rank. Run with 3 ranks.
Expected: odd rank 1, cause rank_conditional_collective, location: the `if batch.numel() == 0:` line.
The shape, in a public thread: https://github.com/bo-ke/llm-internal-medicine/pull/45 """
from datetime import timedelta

import torch
import torch.distributed as dist


def train_step(batch: torch.Tensor) -> None:
    if batch.numel() == 0:
        return
    grad = batch.sum(0)
    dist.all_reduce(grad)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    batch = torch.ones(0 if rank == 1 else 4, 2)  # the filter left nothing on rank 1
    train_step(batch)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
