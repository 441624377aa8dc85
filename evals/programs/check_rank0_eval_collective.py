"""Rank 0 alone calls evaluate(), which all-reduces the accuracy: the collective is reached through a call.

The other ranks go on to the end-of-epoch barrier, which gloo pairs with rank 0's all_reduce (or times out).
Checker: DD101 at the `evaluate(model)` call. Expected cause: rank_conditional_collective.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def evaluate(model: torch.nn.Module) -> float:
    acc = model(torch.ones(4, 4)).mean().detach().reshape(1)
    dist.all_reduce(acc)  # every rank must be here
    return acc.item() / dist.get_world_size()


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=3))
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 4)
    if rank == 0:
        print(f"accuracy {evaluate(model):.3f}", flush=True)
    dist.barrier()
    print(f"DISTDOCTOR_OK rank={rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
