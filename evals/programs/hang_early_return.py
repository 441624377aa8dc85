"""A helper returns early on the ranks other than 0, and rank 0 goes on to a collective below the return.

report_metrics() starts with `if rank != 0: return` (only rank 0 prints); below the print it averages the
metric over the ranks with an all_reduce that the other ranks, already back in the training loop, never
reach: they wait in the end-of-step barrier until the group timeout (300 s). Run with 2 ranks.
Expected: odd rank 0, cause rank_conditional_collective, location: the early return's `if` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def report_metrics(loss: torch.Tensor, step: int, rank: int) -> None:
    if rank != 0:
        return
    print(f"step {step} local loss {loss.item():.4f}", flush=True)
    dist.all_reduce(loss)  # "average over the ranks": only rank 0 is here
    print(f"step {step} mean loss {loss.item() / dist.get_world_size():.4f}", flush=True)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    model = torch.nn.Linear(8, 1)
    for step in range(3):
        loss = model(torch.ones(4, 8)).pow(2).mean().detach()
        if step == 1:
            report_metrics(loss, step, rank)
        dist.barrier()  # end of the step
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
