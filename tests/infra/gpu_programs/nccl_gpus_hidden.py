"""An NCCL job started with CUDA_VISIBLE_DEVICES set to nothing (a scheduler that gave the job no GPU)."""
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("nccl", timeout=timedelta(seconds=60))
x = torch.ones(4, device="cuda")
dist.all_reduce(x)
dist.destroy_process_group()
