"""Rank 0 asks a question on the terminal before training (overwrite the run folder?) and waits for an answer; the
other ranks wait for it in their first collective.

The question is asked under `if rank == 0:`, so only rank 0 blocks reading its standard input (no one types: the
job runs unattended with a terminal or pipe attached, or the question is lost among the other ranks' output);
rank 1 waits in the barrier until the group timeout (300 s). Login prompts of experiment trackers and
"run custom code? [y/N]" questions of model hubs block the same way. Run with 2 ranks, stdin open (a terminal).
Expected: odd rank 0, cause prompt_on_one_rank, location: the `input(...)` line.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def confirm_overwrite(path: str) -> bool:
    answer = input(f"{path} exists. Overwrite? [y/N] ")
    return answer.strip().lower() == "y"


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    out = "/tmp"  # an existing run folder
    if rank == 0 and os.path.isdir(out):
        confirm_overwrite(out)
    dist.barrier()
    total = torch.ones(1)
    dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
