"""Rank 1 starts a metrics flusher thread that takes a lock and never lets go (it flushes forever, holding it);
its training loop then waits for that lock after the first all_reduce, and rank 0 waits in the next all_reduce.
Run with 2 ranks. Expected: odd rank 1, cause collective_timeout (the main thread sleeps in futex; the flusher
thread's line is named), location: rank 1's `with metrics_lock:` line.
"""
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

metrics_lock = threading.Lock()


def flusher() -> None:
    metrics_lock.acquire()  # released when the flush is done: never
    while True:
        time.sleep(0.5)  # flushing to a slow sink, lock held


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    started = threading.Event()
    if rank == 1:
        threading.Thread(target=lambda: (started.set(), flusher()), name="flusher", daemon=True).start()
        started.wait()
    for step in range(100):
        total = torch.ones(4)
        dist.all_reduce(total)
        with metrics_lock:
            pass  # record this step's metrics
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
