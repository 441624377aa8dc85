"""Train the regressor with DDP, one process per GPU."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from data import batches
from model import Regressor


def setup() -> int:
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    return local_rank


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    local_rank = setup()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(Regressor().cuda(local_rank), device_ids=[local_rank], output_device=local_rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step, (x, y) in enumerate(batches(rank, world, args.steps)):
        x, y = x.to(local_rank), y.to(local_rank)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
