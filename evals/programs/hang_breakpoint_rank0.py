"""Rank 0 stops at a debugger breakpoint left in the training loop; the other ranks wait for it.

`breakpoint()` under `if rank == 0:` opens pdb on rank 0, which waits for a command on the terminal (no one
types: the job runs unattended, or the prompt is lost among the other ranks' output); rank 1 goes on to the
next all_reduce and waits there until the group timeout (300 s). Run with 2 ranks, stdin open (a terminal).
Expected: odd rank 0, cause debugger_on_one_rank, location: the `breakpoint()` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    model = torch.nn.Linear(8, 1)
    for step in range(4):
        loss = model(torch.ones(4, 8)).pow(2).mean()
        loss.backward()
        if rank == 0 and step == 2:
            breakpoint()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad = None
        print(f"rank {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
