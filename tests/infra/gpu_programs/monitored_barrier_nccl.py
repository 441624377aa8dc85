"""dist.monitored_barrier() (a gloo-only call) on the default NCCL group."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("nccl", timeout=timedelta(seconds=60), device_id=torch.device("cuda", local_rank))
dist.monitored_barrier(timeout=timedelta(seconds=30))
dist.destroy_process_group()
