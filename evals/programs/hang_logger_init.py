"""Every rank constructs the experiment logger, which takes the run directory's single-writer lock.

Rank 0 gets the lock and waits in the first gradient all_reduce; rank 1 waits for the lock inside the
logger's constructor forever. Run with 2 ranks.
Expected: odd rank 1, cause logger_init_all_ranks, location: the `logger = RunLogger(...)` line.
"""
import fcntl
import os
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist


class RunLogger:
    def __init__(self, run_dir: str) -> None:
        os.makedirs(run_dir, exist_ok=True)
        self.lock = open(os.path.join(run_dir, "run.lock"), "w")
        fcntl.flock(self.lock, fcntl.LOCK_EX)  # one writer per run directory
        self.file = open(os.path.join(run_dir, "metrics.jsonl"), "a")

    def log(self, **values: float) -> None:
        self.file.write(f"{values}\n")


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    time.sleep(0.5 * rank)  # stagger start-up to spare the shared filesystem
    run_dir = os.path.join(tempfile.gettempdir(), f"hang_logger_{os.environ['MASTER_PORT']}")
    logger = RunLogger(run_dir)
    model = torch.nn.Linear(8, 1)
    for step in range(2):
        for p in model.parameters():
            dist.all_reduce(p.data)
        logger.log(step=step)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
