"""Two ranks on one GPU with a gloo group; rank 1 indexes an embedding past its size on the GPU (a device-side
assert) while rank 0 waits in an all_reduce."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
emb = torch.nn.Embedding(10, 4).cuda()
ids = torch.tensor([3, 12 if rank == 1 else 4], device="cuda")  # token id 12 of a 10-word vocabulary on rank 1
out = emb(ids).sum()
torch.cuda.synchronize()
total = torch.tensor([out.item()])
dist.all_reduce(total)
print(f"rank {rank} total {total.item()}", flush=True)
dist.destroy_process_group()
