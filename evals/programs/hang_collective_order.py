"""The ranks call the same two collectives in a different order: rank 0 all_reduces the loss then
broadcasts the step counter, rank 1 broadcasts first (a branch on the rank reordered the calls).
On gloo each rank's first collective waits for its partner's first, which is another operation: rank 0
waits in all_reduce, rank 1 in broadcast, until the group timeout (300 s). Run with 2 ranks.
Expected: odd rank 0 (the ranks split evenly: the lowest), cause rank_conditional_collective, location: the
`if rank == 0:` whose two branches order the collectives differently.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    loss = torch.ones(4)
    step = torch.zeros(1)
    if rank == 0:
        dist.all_reduce(loss)
        dist.broadcast(step, src=0)
    else:
        dist.broadcast(step, src=0)
        dist.all_reduce(loss)
    print(f"rank {rank} loss {loss.tolist()} step {step.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
