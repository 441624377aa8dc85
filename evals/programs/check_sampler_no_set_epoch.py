"""A shuffling DistributedSampler iterated over three epochs without sampler.set_epoch(epoch).

Nothing fails: every epoch sees the same order. Each rank prints `ORDER epoch=<e> <indices>`; the test
compares the epochs (sampler.set_epoch(epoch) at the top of the loop makes them differ). Checker: DD201.
"""
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    data = TensorDataset(torch.arange(16))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=4, sampler=sampler)
    for epoch in range(3):
        order = [int(i) for (batch,) in loader for i in batch]
        print(f"ORDER rank={rank} epoch={epoch} {order}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
