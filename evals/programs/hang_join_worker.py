"""Rank 1 hands its evaluation to a worker thread and joins it; the worker waits on a socket for a reply from a
scoring service that never answers, so rank 1's main thread waits in join() while rank 0 waits for it in
all_reduce. Run with 2 ranks. Expected: odd rank 1, cause collective_timeout, location: the `worker.join()` line.
"""
import socket
import threading
from datetime import timedelta

import torch
import torch.distributed as dist


def score_remotely(rank: int) -> None:
    a, b = socket.socketpair()  # the service's end (b) never writes
    if rank == 1:
        a.recv(1024)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    worker = threading.Thread(target=score_remotely, args=(rank,), name="scorer", daemon=True)
    worker.start()
    worker.join()
    dist.all_reduce(torch.ones(4))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
