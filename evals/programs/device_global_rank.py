"""Binds its GPU by the GLOBAL rank: right on one node, wrong on every node after the first.

On a node with one GPU, the second node's rank 1 calls `torch.cuda.set_device(1)` and dies with
`CUDA error: invalid device ordinal` (on nodes with N GPUs, ranks >= N do). Without a GPU the program
falls back to CPU and gloo, so the bad binding cannot fail here; it prints the index it binds
(`DISTDOCTOR_BIND rank=<global> local_rank=<LOCAL_RANK> index=<bound>`), which shows the bug.
Expected cause: local_rank_device.  Fixed by the patch local_rank_device.
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    target = torch.device(f"cuda:{rank}")  # the GPU this rank trains on (a device object needs no GPU)
    if torch.cuda.is_available():
        torch.cuda.set_device(rank)
        device, backend = target, "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    print(f"DISTDOCTOR_BIND rank={rank} local_rank={os.environ['LOCAL_RANK']} index={target.index}", flush=True)
    dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timedelta(seconds=20))
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    for _ in range(2):
        loss = model(torch.randn(8, 4, device=device)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world_size
        opt.step()
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
