"""Rank 0 fills a shared cache under a file lock and, still holding it, waits in a barrier for the other ranks;
they wait for the lock before they read the cache and never reach the barrier. Run with 2 ranks.
Expected: odd rank 1, cause download_race, location: rank 1's `fcntl.flock` line.
"""
import fcntl
import os
import tempfile
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    folder = os.environ.get("DISTDOCTOR_JOB_DIR") or tempfile.gettempdir()  # the test harness's folder for the job
    lock_path = os.path.join(folder, f"cache-{os.environ['MASTER_PORT']}.lock")  # one per job
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # fill the cache once, under the lock
            store.set("cache_filling", "1")  # tell the others the cache is being filled
            dist.barrier()  # wait until every rank is here before letting go
    else:
        store.wait(["cache_filling"])
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # read the cache once rank 0 has filled it
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
