"""FSDP given a module with one layer moved to the GPU and one left on the CPU, and no device_id."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
model = torch.nn.Sequential(torch.nn.Linear(8, 8).cuda(), torch.nn.Linear(8, 1))  # the head never moved
FSDP(model)
dist.destroy_process_group()
