"""An optimizer overlaps communication with reduce_scatter(..., async_op=True).get_future(), written for NCCL, run on gloo.

Expected cause: gloo_missing_feature.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    world = dist.get_world_size()
    grads = [torch.ones(4) for _ in range(world)]
    shard = torch.empty(4)
    fut = dist.reduce_scatter(shard, grads, async_op=True).get_future()
    fut.wait()
    print("shard", shard, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
