"""A background thread refreshes shared run statistics under a module-level lock, taken with `acquire()` and given
back with `release()` at the end, with no try/finally. On rank 1 the node's stats file is truncated (a partial
write): json.loads raises, the thread dies holding the lock. Rank 1's main thread then waits forever in `with
stats_lock:` after its first all_reduce, rank 0 waits in the next all_reduce. The bad file comes from the data
(each rank reads its own node's file), not from a rank test. 2 ranks.
Expected: odd rank 1, cause collective_timeout, location: the thread's `stats_lock.acquire()` line (the lock a dead
thread took and never gave back: the release is skipped by the exception).
"""
import json
import os
import threading
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

stats_lock = threading.Lock()
stats: dict = {}


def refresh_stats(path: Path) -> None:
    stats_lock.acquire()
    stats.update(json.loads(path.read_text()))
    stats_lock.release()


def write_stats_files(job: Path) -> None:
    """What the earlier stages left: one stats file per node, the second one cut short."""
    (job / "stats0.json").write_text(json.dumps({"tokens": 1000}))
    (job / "stats1.json").write_text(json.dumps({"tokens": 1000})[:7])


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    job = Path(os.environ.get("DISTDOCTOR_JOB_DIR", "/tmp"))
    write_stats_files(job)
    dist.barrier()
    refresher = threading.Thread(target=refresh_stats, args=(job / f"stats{rank}.json",), name="stats")
    refresher.start()
    refresher.join()
    for step in range(3):
        total = torch.ones(4) * step
        dist.all_reduce(total)
        with stats_lock:
            tokens = stats.get("tokens", 0)
    print(f"rank {rank}: {tokens} tokens", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
