"""Rank 0 sends the run config to the other ranks point to point, but its loop is off by one
(`range(1, world - 1)`), so rank 2 never gets its copy: rank 2 waits in `dist.recv(src=0)` while ranks 0 and 1
go on to the barrier. 3 ranks.
Expected: odd rank 2, cause rank_conditional_collective, location: the `for dst in range(1, world - 1):` line."""
from datetime import timedelta

import torch
import torch.distributed as dist


def share_config(config: torch.Tensor) -> torch.Tensor:
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        for dst in range(1, world - 1):
            dist.send(config, dst=dst)
    else:
        dist.recv(config, src=0)
    return config


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    config = torch.tensor([3e-4, 32.0]) if dist.get_rank() == 0 else torch.zeros(2)
    share_config(config)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
