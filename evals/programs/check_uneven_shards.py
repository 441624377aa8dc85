"""Five files split by hand as files[rank::world_size]: rank 0 gets three, rank 1 two.

Rank 0's third step all-reduces gradients that rank 1 never sends: it waits until the timeout.
Checker: DD202. Expected cause: dataloader_uneven.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=3))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    files = [f"shard_{i}.bin" for i in range(5)]
    for name in files[rank::world_size]:
        grad = torch.ones(2)
        dist.all_reduce(grad)
        print(f"rank {rank} trained on {name}", flush=True)
    print(f"DISTDOCTOR_OK rank={rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
