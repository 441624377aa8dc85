"""Every rank saves its state to the same checkpoint path; rank 1 happens to write last.

Nothing fails: the file holds rank 1's state (its RNG state, its step counter), not rank 0's. After a
barrier rank 0 reads the file back and prints `SAVED_BY <rank>`. Checker: DD301.
"""
import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    path = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "ckpt.pt")
    time.sleep(0.5 * rank)  # rank 1 writes after rank 0
    torch.save({"rank": rank, "rng": torch.get_rng_state()}, path)
    dist.barrier()
    if rank == 0:
        print(f"SAVED_BY {torch.load(path, map_location='cpu')['rank']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
