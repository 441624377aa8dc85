"""A training script whose main() carries torch.distributed.elastic's @record (as many do), started by srun
with one task per rank (no torchrun): rank --bad-rank dies of SIGSEGV in its step while the others wait in
all_reduce. The survivors' tracebacks pass through @record's wrapper (a torch/distributed/elastic frame),
although no torchrun agent ran.

Expected cause: peer_died_first (the first failing rank is --bad-rank; the others only echo it).
"""
import argparse
import os
import signal
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bad-rank", type=int, default=1)
    parser.add_argument("--bad-step", type=int, default=2)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    for step in range(5):
        t = torch.randn(1024)
        if rank == args.bad_rank and step == args.bad_step:
            os.kill(os.getpid(), signal.SIGSEGV)
        dist.all_reduce(t)
        print(f"rank {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
