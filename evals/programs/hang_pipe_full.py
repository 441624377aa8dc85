"""Rank 1 streams its samples to a writer process over a multiprocessing pipe; the writer is stuck (it never
reads), the pipe's buffer fills, and rank 1 blocks in conn.send() while rank 0 waits in all_reduce. Run with 2
ranks. Expected: odd rank 1, cause collective_timeout, location: the `conn.send(payload)` line.
"""
import multiprocessing as mp
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def writer(conn) -> None:
    while True:
        time.sleep(1)  # waits for a disk that never comes back; never reads


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    conn = None
    if rank == 1:
        conn, child = mp.Pipe()
        mp.get_context("fork").Process(target=writer, args=(child,), daemon=True).start()
    payload = b"x" * 65536
    for step in range(20):
        if conn is not None:
            conn.send(payload)
        dist.all_reduce(torch.ones(4))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
