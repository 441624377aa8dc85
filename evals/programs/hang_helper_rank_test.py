"""A Trainer-like loop logs every 2 steps through a helper, `should_log(step)`, that also tests the rank (only rank 0
logs); the log step all_reduces the running loss, so at step 2 rank 0 waits in that all_reduce while rank 1 finishes
the loop and waits in the final barrier. The rank test sits in the helper, the branch in the loop. 2 ranks.
Expected: odd rank 0, cause rank_conditional_collective, location: the `if should_log(step):` line."""
from datetime import timedelta

import torch
import torch.distributed as dist

LOG_EVERY = 2


def should_log(step: int) -> bool:
    return dist.get_rank() == 0 and step > 0 and step % LOG_EVERY == 0


def log_metrics(step: int, running: torch.Tensor) -> None:
    dist.all_reduce(running)
    print(f"step {step}: loss {running.item() / dist.get_world_size():.3f}", flush=True)


def train(steps: int) -> None:
    running = torch.zeros(1)
    for step in range(steps):
        running += 0.1 * step
        if should_log(step):
            log_metrics(step, running)
    dist.barrier()


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    train(steps=4)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
