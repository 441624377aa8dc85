"""init_process_group(device_id=torch.device("cuda")): a device without the rank's local index."""
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("nccl", timeout=timedelta(seconds=60), device_id=torch.device("cuda"))
dist.destroy_process_group()
