"""Two NCCL ranks both on GPU 0 (every rank calls set_device(0)): NCCL refuses two ranks on one GPU."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
x = torch.ones(4, device="cuda")
dist.all_reduce(x)
print(f"rank {os.environ['RANK']} sum {x.sum().item()}", flush=True)
dist.destroy_process_group()
