"""Rank 1 is stuck in slow work (a sleep) while rank 0 waits at a monitored_barrier with a short timeout.

Nothing in the log names why rank 1 is late: expected cause collective_timeout.
"""
import time
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    if rank == 1:
        time.sleep(8)
    dist.monitored_barrier(timeout=timedelta(seconds=3))
    print("rank", rank, "passed the barrier", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
