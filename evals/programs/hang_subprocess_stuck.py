"""Rank 1 runs an external command at each step (a status query of a tool, here a command that never returns:
a `sleep`), with no timeout: it waits in subprocess.run while rank 0 waits for it in all_reduce. Run with 2
ranks. Expected: odd rank 1, cause collective_timeout, location: the `subprocess.run(cmd, check=False)` line.
"""
import subprocess
from datetime import timedelta

import torch
import torch.distributed as dist


def query_status(rank: int) -> None:
    cmd = ["sleep", "3600"] if rank == 1 else ["true"]  # the tool that never answers on rank 1's node
    subprocess.run(cmd, check=False)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    for step in range(3):
        query_status(rank)
        dist.all_reduce(torch.ones(4))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
