"""Batches come from a generator that all_reduces a "more data?" flag before each batch (so all ranks stop
together); the consumer also stops at its own `max_steps`, taken from its shard length, which is shorter on
rank 0: rank 0 breaks out of the `for` (the generator is left suspended) and waits in the final barrier, while
ranks 1 and 2 wait in the generator's all_reduce. 3 ranks.
Expected: odd rank 0, cause dataloader_uneven, location: the `if step >= max_steps:` line."""
from datetime import timedelta

import torch
import torch.distributed as dist


def batches(shard: list[int]):
    for item in shard:
        more = torch.ones(1)
        dist.all_reduce(more, op=dist.ReduceOp.MIN)
        if more.item() == 0:
            return
        yield torch.tensor([float(item)])


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    shard = list(range(3 if rank == 0 else 5))
    max_steps = len(shard) - 1
    for step, batch in enumerate(batches(shard)):
        if step >= max_steps:
            break
        batch.mul_(2)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
