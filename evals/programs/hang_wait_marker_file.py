"""Rank 0 waits for a marker file that rank 1 is to write when its preprocessing is done; rank 1 writes it into
its own node-local temporary folder (not the shared path rank 0 polls), so rank 0 polls forever while rank 1
waits in the barrier. Run with 2 ranks.
Expected: odd rank 0, cause collective_timeout, location: the `while not os.path.exists(marker):` line.
"""
import os
import tempfile
import time
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    shared = os.environ.get("DISTDOCTOR_JOB_DIR") or tempfile.gettempdir()
    marker = os.path.join(shared, "preprocess.done")
    if rank == 1:
        local = tempfile.mkdtemp(prefix="node_local_")
        open(os.path.join(local, "preprocess.done"), "w").close()
    else:
        while not os.path.exists(marker):
            time.sleep(0.5)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
