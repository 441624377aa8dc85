"""Each rank binds GPU number RANK: on a node with fewer GPUs than ranks, a rank asks for one that is not there."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
x = torch.ones(4, device="cuda")
dist.all_reduce(x)
print(f"rank {rank} sum {x.sum().item()}", flush=True)
dist.destroy_process_group()
