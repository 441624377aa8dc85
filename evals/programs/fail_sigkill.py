"""One rank is killed with SIGKILL (as the OOM killer or a scheduler would) in the middle of training.

No out-of-memory message is printed: the cause a log can show is peer_died_first.
"""
import argparse
import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bad-rank", type=int, default=1)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    for step in range(5):
        t = torch.randn(1024)
        if rank == args.bad_rank and step == 2:
            time.sleep(0.5)  # the other ranks are already waiting in all_reduce when the kill comes
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(t)
        print(f"rank {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
