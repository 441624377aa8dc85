"""Rank 1 hits a bad sample at step 3: the step's try/except logs the error and `continue`s, skipping that step's
all_reduce. From then on rank 1 is one collective ahead: it leaves the loop first and waits in the final barrier
while ranks 0 and 2 wait in their last all_reduce (a swallowed exception skips a collective on one rank). 3 ranks.
Expected: odd rank 1, cause rank_conditional_collective, location: the `except ValueError as exc:` line.
The shape, in a public thread: https://github.com/Lightning-AI/pytorch-lightning/issues/6430 """
from datetime import timedelta

import torch
import torch.distributed as dist


def compute_loss(rank: int, step: int) -> torch.Tensor:
    if rank == 1 and step == 3:
        raise ValueError("sample 17: empty sequence")
    return torch.ones(4) * step


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    for step in range(6):
        try:
            loss = compute_loss(rank, step)
        except ValueError as exc:
            print(f"rank {rank}: step {step} skipped: {exc}", flush=True)
            continue
        dist.all_reduce(loss)
    dist.barrier()
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
