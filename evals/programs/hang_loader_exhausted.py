"""Each rank iterates its own DataLoader with `while True: next(it)` and leaves the loop on StopIteration; rank 1's
shard is shorter, so it leaves first and waits in the final barrier while ranks 0 and 2 wait in the loop's
all_reduce. Run with 3 ranks. Expected: odd rank 1, cause dataloader_uneven, location: the `while True:` line.
The shape, in a public thread: https://github.com/horovod/horovod/issues/3980 """
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    data = TensorDataset(torch.ones(7 if rank == 1 else 10, 4))  # shards split unevenly
    it = iter(DataLoader(data, batch_size=2))
    while True:
        try:
            (batch,) = next(it)
        except StopIteration:
            break
        dist.all_reduce(batch.sum(0))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
