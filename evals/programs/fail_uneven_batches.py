"""The data comes in 5 shard files split across ranks by shard (rank::world): rank 0 gets one shard more.

The ranks with one more batch wait in the gradient all_reduce for a rank that already left the loop.
Expected cause: dataloader_uneven.
"""
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
    rank, world = dist.get_rank(), dist.get_world_size()
    shards = [torch.randn(4, 8) for _ in range(5)]  # 5 shard files of one batch each
    batches = shards[rank::world]  # 5 is not a multiple of the world size
    print(f"rank {rank}: {len(batches)} batches", flush=True)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, batch in enumerate(batches):
        opt.zero_grad()
        model(batch).pow(2).mean().backward()
        opt.step()
        print(f"rank {rank} step {step}", flush=True)
    print(f"rank {rank}: epoch done, evaluating", flush=True)
    total = torch.tensor([float(len(batches))])
    dist.all_reduce(total)
    print(f"rank {rank}: total batches {total.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
