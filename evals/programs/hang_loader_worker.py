"""One rank's DataLoader worker never returns from the dataset's __getitem__ (a read from remote storage that
blocks), so that rank waits for its next batch while the other rank waits in the step's all_reduce.

The rank itself shows only "data loading" (its main thread waits on the worker queue); the line that hangs is
in the worker process. Run with 2 ranks.
Expected: odd rank 1, cause collective_timeout (a straggler: the collective is not mismatched), location: the
blocking read in __getitem__, where rank 1's worker is.
"""
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class RemoteShards(Dataset):
    """Samples read from remote storage; on rank 1 the read of sample 8 never completes."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.rank == 1 and i == 8:
            time.sleep(3600)  # the read that never returns
        return torch.ones(4)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    loader = DataLoader(RemoteShards(rank), batch_size=4, num_workers=1)
    for batch in loader:
        grad = batch.sum(0)
        dist.all_reduce(grad)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
