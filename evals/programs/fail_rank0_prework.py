"""Rank 0 alone does slow pre-work (a sleep standing in for tokenising a dataset with `map`) while the
other ranks wait in dist.barrier() under a short process-group timeout (--late-rank N: rank N does it).

The waiting rank times out although network, launch and code are right: expected cause rank_start_skew.
"""
import argparse
import sys
import time
from datetime import timedelta

import torch.distributed as dist

PREWORK_S = 20  # longer than the group timeout below
TIMEOUT_S = 5


def tokenize_dataset() -> None:
    """Stands for `dataset.map(tokenize)` on rank 0: progress lines, then a long wait."""
    print("Running tokenizer on train dataset", flush=True)
    for done in (0, 10, 20):
        print(f"Map:  {done:3d}%|          | {done * 100}/10000 [00:{done:02d}<00:20, 500.00 examples/s]",
              file=sys.stderr, flush=True)
        time.sleep(PREWORK_S / 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--late-rank", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    if rank == args.late_rank:
        tokenize_dataset()  # the others go straight to the barrier and wait for this rank
    dist.barrier()
    print("rank", rank, "passed the barrier", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
