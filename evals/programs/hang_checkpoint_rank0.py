"""The main process saves the checkpoint, and saving gathers every rank's RNG state (a collective).

Rank 0 waits in all_gather_object inside save_checkpoint(); the other ranks wait in the barrier that
follows the save. Run with 2 ranks.
Expected: odd rank 0, cause checkpoint_all_ranks, location: the `if is_main_process():` line.
"""
import os
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist


def is_main_process() -> bool:
    return dist.get_rank() == 0


def save_checkpoint(model: torch.nn.Module, step: int, path: str) -> None:
    rng_states = [None] * dist.get_world_size()
    dist.all_gather_object(rng_states, torch.get_rng_state())  # every rank must take part
    torch.save({"step": step, "model": model.state_dict(), "rng": rng_states}, path)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    model = torch.nn.Linear(8, 1)
    path = os.path.join(tempfile.gettempdir(), f"hang_checkpoint_{os.getppid()}.pt")
    for step in range(2):
        for p in model.parameters():
            dist.all_reduce(p.data)
        if is_main_process():
            save_checkpoint(model, step, path)
        dist.barrier()  # wait until the checkpoint is written
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
