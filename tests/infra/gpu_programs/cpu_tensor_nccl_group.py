"""A GPU run with an NCCL-only process group, then a collective on a tensor left on the CPU."""
from datetime import timedelta

import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
loss_sum = torch.tensor([1.5])  # a metric kept on the CPU
dist.all_reduce(loss_sum)
dist.destroy_process_group()
