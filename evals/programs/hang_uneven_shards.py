"""7 shard files split across 3 ranks by shard (rank::world): rank 0 gets one batch more than the others.

Rank 0 waits in the gradient all_reduce of its extra batch; ranks 1 and 2 have left the loop and wait in
the end-of-epoch barrier. Run with 3 ranks.
Expected: odd rank 0, cause dataloader_uneven, location: the `for batch in batches:` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def average_gradients(model: torch.nn.Module) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    shards = [torch.randn(4, 8) for _ in range(7)]
    batches = shards[rank::world]
    model = torch.nn.Linear(8, 1)
    for batch in batches:
        model.zero_grad()
        model(batch).pow(2).mean().backward()
        average_gradients(model)
    print(f"rank {rank}: {len(batches)} batches done", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
