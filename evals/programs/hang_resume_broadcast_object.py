"""Resuming from a checkpoint on node-local disks: each rank looks for `last.json` in its own node's folder, and when
it finds one loads it and shares it with `dist.broadcast_object_list(box, src=0)` (written for a shared file
system, where every rank sees the file). The earlier run's last save landed on the third node only, so rank 2
enters the branch and waits in broadcast_object_list for rank 0, while ranks 0 and 1 found nothing, skipped it and
wait in the first training all_reduce. The branch's test is on the file system, not on the rank. 3 ranks.
Expected: odd rank 2, cause rank_conditional_collective, location: the `if os.path.exists(path):` line.
"""
import json
import os
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist


def node_dir(job: Path, node: int) -> Path:
    """The folder standing for one node's local disk (one rank per node here)."""
    path = job / f"node{node}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def resume_state(ckpt_dir: Path) -> dict:
    """The training state of the last checkpoint, the same on every rank; a fresh state when there is none."""
    state = {"step": 0}
    path = os.path.join(ckpt_dir, "last.json")
    if os.path.exists(path):
        with open(path) as f:
            box = [json.load(f)]
        dist.broadcast_object_list(box, src=0)
        state = box[0]
    return state


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    job = Path(os.environ.get("DISTDOCTOR_JOB_DIR", "/tmp"))
    (node_dir(job, 2) / "last.json").write_text(json.dumps({"step": 120}))  # the earlier run's last save
    dist.barrier()
    state = resume_state(node_dir(job, rank))
    for step in range(state["step"], state["step"] + 3):
        loss = torch.ones(4) * step
        dist.all_reduce(loss)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
