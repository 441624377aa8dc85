"""A training-step wrapper catches every exception (`except Exception:`) so that one bad batch does not end a long
run. Rank 1's shard holds an empty sample at its third step: the step's `assert` fails before the gradient
all_reduce, the wrapper swallows the AssertionError, and rank 1 is one collective behind from then on. It leaves
the loop first and waits in the final barrier while ranks 0 and 2 wait in their fourth all_reduce, inside the
step the wrapper runs. The empty sample comes from the data (every third item of one list), not from a rank test.
3 ranks. Expected: odd rank 1, cause rank_conditional_collective, location: the wrapper's `except Exception:`
line (the handler that let the rank skip the collective).
"""
from datetime import timedelta
from typing import Callable

import torch
import torch.distributed as dist

LENGTHS = [4, 4, 4, 4, 4, 4, 4, 0, 4, 4, 4, 4]  # sequence lengths; the one at index 7 is empty


def train_step(model: torch.nn.Module, length: int) -> None:
    """Forward, backward and the gradient all_reduce of one sequence."""
    assert length > 0, "empty sequence"
    model.zero_grad()
    model(torch.ones(length, 8)).mean().backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)


def safe_step(step: Callable[..., None], *args) -> bool:
    """Run one step; a step that fails is skipped (False) so that the run goes on."""
    try:
        step(*args)
        return True
    except Exception:
        return False


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = torch.nn.Linear(8, 1)
    skipped = 0
    for length in LENGTHS[rank::world]:
        skipped += not safe_step(train_step, model, length)
    dist.barrier()
    print(f"rank {rank}: {skipped} steps skipped", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
