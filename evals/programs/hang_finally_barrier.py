"""The script wraps training in try/finally and meets the other ranks in a barrier in the `finally:` before
tearing the group down ("let every rank finish"). Rank 1's shard has a record without its "label" key: the KeyError
leaves train() on rank 1, whose finally clause then waits in the barrier, while ranks 0 and 2 wait in the next
step's all_reduce inside train(). The exception never surfaces: rank 1 hangs in the clean-up instead of failing.
The bad record comes from the data (every third record), not from a rank test. 3 ranks.
Expected: odd rank 1, cause rank_conditional_collective (the barrier runs on the rank that raised only), location:
the `finally:` line.
"""
from datetime import timedelta

import torch
import torch.distributed as dist

RECORDS = [{"x": float(i), "label": 1.0} for i in range(12)]
del RECORDS[7]["label"]  # one record of the data set lost its label


def train(records: list[dict]) -> float:
    """One step per record: its loss all_reduced over the ranks."""
    total = 0.0
    for rec in records:
        loss = torch.tensor([rec["x"] - rec["label"]]) ** 2
        dist.all_reduce(loss)
        total += loss.item()
    return total


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        print(f"rank {rank}: loss {train(RECORDS[rank::world]):.2f}", flush=True)
    finally:
        dist.barrier()  # every rank finishes before the group goes
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
