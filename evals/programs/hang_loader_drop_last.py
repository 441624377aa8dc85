"""Each rank wraps its own slice of a 13-sample dataset (every third sample from its rank: 5, 4 and 4 samples) in a
DataLoader with batch_size=4 and drop_last=False, without a DistributedSampler (which would pad the slices to one
length). Rank 0 gets two batches, ranks 1 and 2 one: rank 0's second gradient all_reduce waits for ranks that
already left train_epoch and wait in the barrier after it. The batch counts are computed by the DataLoader from
the slice sizes; no test reads the rank. 3 ranks.
Expected: odd rank 0, cause dataloader_uneven, location: the `for (x,) in loader:` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Subset, TensorDataset


def train_epoch(model: torch.nn.Module, loader: DataLoader) -> int:
    """One pass over the loader, gradients averaged over the ranks by hand; returns the batches seen."""
    seen = 0
    for (x,) in loader:
        model.zero_grad()
        model(x).pow(2).mean().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        seen += 1
    return seen


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = TensorDataset(torch.randn(13, 8))
    mine = Subset(dataset, list(range(rank, len(dataset), world)))
    loader = DataLoader(mine, batch_size=4, drop_last=False)
    model = torch.nn.Linear(8, 1)
    seen = train_epoch(model, loader)
    dist.barrier()
    print(f"rank {rank}: {seen} batches", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
