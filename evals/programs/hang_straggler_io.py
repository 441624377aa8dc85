"""Rank 1 reads its shard from a path that never delivers (a named pipe no writer opens, as a stalled
network filesystem would): it is in no collective, and rank 0 waits for it in all_reduce. Run with 2 ranks.
Expected: odd rank 1, cause collective_timeout, location: the `open(path, "rb")` line in read_shard.
"""
import os
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist


def read_shard(path: str) -> torch.Tensor:
    with open(path, "rb") as f:
        return torch.frombuffer(bytearray(f.read()), dtype=torch.float32)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    folder = tempfile.mkdtemp(prefix=f"hang_io_{rank}_")
    path = os.path.join(folder, "shard.bin")
    if rank == 1:
        os.mkfifo(path)  # the stalled mount
    else:
        torch.ones(8).numpy().tofile(path)
    data = read_shard(path)
    dist.all_reduce(data)
    print(f"rank {rank}: {data.sum().item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
