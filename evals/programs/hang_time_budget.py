"""Each rank stops training when its own wall-clock budget is spent (`if time.monotonic() - start > budget_s:
break`); rank 1 started its clock while rank 0 still loaded a checkpoint, so it breaks out one step earlier and waits in the final
barrier while rank 0 waits in the next step's all_reduce (a per-rank stop test, not a shared one). 2 ranks.
Expected: odd rank 1, cause rank_conditional_collective, location: the `if time.monotonic() - start > budget_s:` line."""
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    budget_s = 1.5
    if rank == 0:
        time.sleep(1.0)  # rank 0 loads the checkpoint before its clock starts
    start = time.monotonic()
    dist.barrier()  # rank 1's clock runs while it waits here for rank 0
    step = 0
    while True:
        if time.monotonic() - start > budget_s:
            break
        grad = torch.ones(8) * step
        dist.all_reduce(grad)
        time.sleep(0.2)
        step += 1
    print(f"rank {rank}: stopped after {step} steps", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
