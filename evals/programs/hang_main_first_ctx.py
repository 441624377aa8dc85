"""A `main_process_first` context manager (the transformers / YOLOv5 idea): the other ranks wait in a barrier in
`__enter__` until rank 0 has built the dataset and reached the barrier in `__exit__`; but the dataset builder
all_reduces its size, so rank 0 waits in that all_reduce inside the block while ranks 1 and 2 wait in the
barrier of `__enter__`. 3 ranks.
Expected: odd rank 0, cause rank_conditional_collective, location: the `with main_process_first(rank):` line."""
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist


@contextmanager
def main_process_first(rank: int):
    if rank != 0:
        dist.barrier()
    yield
    if rank == 0:
        dist.barrier()


def build_dataset(rank: int) -> torch.Tensor:
    data = torch.arange(10.0 + rank)
    size = torch.tensor([float(len(data))])
    dist.all_reduce(size)
    return data


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    with main_process_first(rank):
        data = build_dataset(rank)
    dist.all_reduce(data[:1])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
