"""Rank 0 saves the checkpoint; the other ranks load it as soon as the file appears, with no barrier.

Expected cause: checkpoint_all_ranks (a non-collective save/load: the readers see a half-written file).
"""
import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    model = torch.nn.Linear(2048, 2048)
    path = os.path.join(args.out, "ckpt.pt")
    if rank == 0:
        print(f"rank {rank}: saving checkpoint to {os.path.basename(path)}", flush=True)
        torch.save({"step": 100, "model": model.state_dict()}, path)
    while not os.path.exists(path):  # "wait for rank 0's checkpoint", instead of a barrier
        time.sleep(0.001)
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    print(f"rank {rank}: resumed from step {state['step']}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
