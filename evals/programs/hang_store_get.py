"""Rank 0 reads the best checkpoint's path from the job's key-value store, which rank 1 was to set when its
validation found a new best; it found none, set nothing, and went on to the barrier, so rank 0 waits in
store.get while rank 1 waits in the barrier. Run with 2 ranks.
Expected: odd rank 0, cause collective_timeout, location: the `path = store.get("best_checkpoint")` line.
"""
import os
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=timedelta(seconds=300))
    best = False  # rank 1's validation found no new best
    if rank == 1 and best:
        store.set("best_checkpoint", "/ckpt/best.pt")
    if rank == 0:
        path = store.get("best_checkpoint")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
