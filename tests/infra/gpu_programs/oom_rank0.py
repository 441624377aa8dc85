"""Rank 0 asks for more GPU memory than the card has; rank 1 waits for it in a CPU (gloo) all_reduce."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank = dist.get_rank()
if rank == 0:
    total = torch.cuda.get_device_properties(0).total_memory
    activations = torch.empty(2 * total, dtype=torch.uint8, device="cuda")
x = torch.ones(4)
dist.all_reduce(x)
dist.destroy_process_group()
