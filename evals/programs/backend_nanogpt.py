"""Broken on CPU: a nanoGPT / build-nanogpt style DDP set-up (config globals, backend = 'nccl').

Run: torchrun --standalone --nproc_per_node=2 backend_nanogpt.py [--device=cpu]
Fails with "Distributed package doesn't have NCCL built in" on a CPU-only torch; with gloo alone it would
then fail on DistributedDataParallel's device_ids ValueError; patched by gloo_backend + ddp_cpu_args, and
without --device by cuda_requirements (the config default `device = 'cuda'` falls back to 'cpu').
"""
import os
import sys
from datetime import timedelta

import torch
import torch.nn as nn
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

# -----------------------------------------------------------------------------
# config, overridable as --key=value (the configurator style of nanoGPT)
backend = 'nccl'  # 'nccl', 'gloo', etc.
device = 'cuda'  # 'cpu', 'cuda', 'cuda:0', ...
max_iters = 4
batch_size = 8
learning_rate = 0.05
for arg in sys.argv[1:]:
    key, _, value = arg.removeprefix('--').partition('=')
    if key not in globals():
        raise SystemExit(f"unknown config key: {key}")
    globals()[key] = type(globals()[key])(value)
# -----------------------------------------------------------------------------

ddp = int(os.environ.get('RANK', -1)) != -1
if ddp:
    init_process_group(backend=backend, timeout=timedelta(seconds=60))
    ddp_rank = int(os.environ['RANK'])
    ddp_local_rank = int(os.environ['LOCAL_RANK'])
    ddp_world_size = int(os.environ['WORLD_SIZE'])
    device = f'cuda:{ddp_local_rank}'
    torch.cuda.set_device(device)
    master_process = ddp_rank == 0
else:
    ddp_rank, ddp_local_rank, ddp_world_size, master_process = 0, 0, 1, True

torch.manual_seed(1337)
model = nn.Sequential(nn.Embedding(16, 8), nn.Flatten(), nn.Linear(8 * 4, 16))
model.to(device)
if ddp:
    model = DDP(model, device_ids=[ddp_local_rank])
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

gen = torch.Generator().manual_seed(100 + ddp_rank)  # each rank its own shard of data
for step in range(max_iters):
    x = torch.randint(0, 16, (batch_size, 4), generator=gen).to(device)
    y = torch.randint(0, 16, (batch_size,), generator=gen).to(device)
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if master_process:
        print(f"step {step}: loss {loss.item():.4f}", flush=True)

checksum = sum(p.detach().double().sum().item() for p in model.parameters())
print(f"DISTDOCTOR_OK rank={ddp_rank} checksum={checksum!r}", flush=True)
if ddp:
    torch.distributed.barrier()  # no rank tears gloo down while a peer still talks to it
    destroy_process_group()
