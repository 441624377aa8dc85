"""Synthetic batches: each rank draws its own shard of a fixed data set."""
import torch


def batches(rank: int, world: int, steps: int, batch: int = 16):
    g = torch.Generator().manual_seed(1234)
    xs = torch.randn(steps * world * batch, 8, generator=g)
    ys = xs.sum(dim=1, keepdim=True)
    for step in range(steps):
        lo = (step * world + rank) * batch
        yield xs[lo:lo + batch], ys[lo:lo + batch]
