"""Each rank prefetches batches in a background thread that puts them on a queue; on rank 1 the thread dies on
a bad record (its exception is printed, then the thread is gone), and the main thread waits forever in
queue.get() while rank 0 waits for it in all_reduce. Run with 2 ranks.
Expected: odd rank 1, cause collective_timeout, location: the `batch = batches.get()` line.
"""
import queue
import threading
from datetime import timedelta

import torch
import torch.distributed as dist


def prefetch(rank: int, batches: queue.Queue) -> None:
    for i in range(100):
        if rank == 1 and i == 2:
            raise KeyError(f"record {i}: missing field 'text'")
        batches.put(torch.ones(4) * i)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    batches: queue.Queue = queue.Queue(maxsize=4)
    threading.Thread(target=prefetch, args=(rank, batches), name="prefetch", daemon=True).start()
    for step in range(50):
        batch = batches.get()
        dist.all_reduce(batch)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
