"""Each rank passes device_id=cuda:RANK to init_process_group: on a node with fewer GPUs than ranks, a rank names
a GPU that is not there."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
dist.init_process_group("nccl", timeout=timedelta(seconds=60), device_id=torch.device("cuda", rank))
x = torch.ones(4, device=f"cuda:{rank}")
dist.all_reduce(x)
print(f"rank {rank} sum {x.sum().item()}", flush=True)
dist.destroy_process_group()
