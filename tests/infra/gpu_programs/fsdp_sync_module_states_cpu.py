"""FSDP(sync_module_states=True) given a model never moved to the GPU, and no device_id."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
FSDP(torch.nn.Linear(8, 1), sync_module_states=True)
dist.destroy_process_group()
