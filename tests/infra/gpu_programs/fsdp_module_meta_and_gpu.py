"""FSDP given a module built partly on the meta device (deferred init) and partly on the GPU, and no device_id."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
model = torch.nn.Sequential(torch.nn.Linear(8, 8, device="cuda"), torch.nn.Linear(8, 1, device="meta"))
FSDP(model)
dist.destroy_process_group()
