"""Four ranks read their shard through a pipe fed by a reader process (a remote-storage client); on ranks 1 and 3
the client stalls before sending anything, so those two ranks block in `os.read` while ranks 0 and 2 wait in the
step's all_reduce. Two odd ranks of four, both in a blocked read. 4 ranks.
Expected: odd ranks 1 and 3, cause collective_timeout, location: the `chunk = os.read(fd, 1 << 16)` line."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def open_shard(rank: int) -> int:
    read_fd, write_fd = os.pipe()
    if rank % 2 == 0:
        os.write(write_fd, b"\x01" * 64)
        os.close(write_fd)
    else:
        _stalled_clients.append(write_fd)  # the client holds its end open and never writes
    return read_fd


_stalled_clients: list[int] = []


def read_shard(fd: int) -> bytes:
    data = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return data
        data += chunk


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    data = read_shard(open_shard(rank))
    grad = torch.tensor([float(len(data))])
    dist.all_reduce(grad)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
