"""A model moved to the rank's GPU (no DDP wrapper, e.g. an evaluation copy) fed a batch that stayed on the CPU."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).cuda()
batch = torch.randn(4, 8)  # the loader's tensors, never moved
loss = model(batch).sum()
dist.all_reduce(loss)
dist.destroy_process_group()
