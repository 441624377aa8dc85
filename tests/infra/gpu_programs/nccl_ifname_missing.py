"""An NCCL job told to use a network interface this host does not have (NCCL_SOCKET_IFNAME copied from
another cluster's job script)."""
from datetime import timedelta

import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=timedelta(seconds=60))
x = torch.ones(4, device="cuda")
dist.all_reduce(x)
dist.destroy_process_group()
