"""DDP given device_ids=[LOCAL_RANK] for a model whose parameters were never moved to the GPU."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
model = DDP(torch.nn.Linear(8, 1), device_ids=[local_rank])
dist.destroy_process_group()
