"""Rank 1 posts irecv and reads the buffer without waiting for the work; rank 0 sends a moment later.

Nothing fails: rank 1 uses zeros instead of the 7s rank 0 sent and prints `RECEIVED <sum>`. Checker: DD501.
"""
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    buf = torch.zeros(4)
    if rank == 0:
        time.sleep(1.0)
        dist.send(torch.full((4,), 7.0), dst=1)
    else:
        dist.irecv(buf, src=0)
        print(f"RECEIVED {buf.sum().item():.0f}", flush=True)  # read before the data arrived
        time.sleep(1.5)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
