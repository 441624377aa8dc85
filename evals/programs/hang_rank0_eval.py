"""Rank 0 alone runs the evaluation, whose metric all_reduce waits for ranks that never call it.

The other ranks go straight to the end-of-epoch barrier: rank 0 waits in all_reduce inside evaluate(),
the others in barrier(), until the group timeout (300 s). Run with 2 ranks.
Expected: odd rank 0, cause rank_conditional_collective, location: the `if rank == 0:` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def evaluate(model: torch.nn.Module) -> float:
    with torch.no_grad():
        loss = model(torch.ones(4, 8)).pow(2).mean().reshape(1)
    dist.all_reduce(loss)  # a collective: every rank must get here
    return loss.item() / dist.get_world_size()


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    model = torch.nn.Linear(8, 1)
    for step in range(2):
        for p in model.parameters():
            dist.all_reduce(p.data)
        print(f"rank {rank} step {step}", flush=True)
    if rank == 0:
        print(f"eval loss {evaluate(model):.3f}", flush=True)
    dist.barrier()
    print(f"rank {rank}: epoch done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
