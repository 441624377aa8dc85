"""A `rank_zero_only` decorator (the Lightning utility's idea) wraps a function that saves the run summary; the
function all_reduces the epoch count first, so rank 0 waits in that all_reduce while rank 1, for which the
decorated call did nothing, waits in the final barrier. The rank test is inside the decorator. 2 ranks.
Expected: odd rank 0, cause rank_conditional_collective, location: the `@rank_zero_only` line above the function."""
import functools
from datetime import timedelta

import torch
import torch.distributed as dist


def rank_zero_only(fn):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if dist.get_rank() == 0:
            return fn(*args, **kwargs)
        return None
    return wrapped


@rank_zero_only
def save_summary(epochs: int) -> None:
    seen = torch.tensor([float(epochs)])
    dist.all_reduce(seen)
    print(f"summary: {seen.item()} epochs seen over all ranks", flush=True)


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    save_summary(3)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
