"""Train a small MLP with the split optimizer."""
import argparse
from datetime import timedelta

import torch
import torch.distributed as dist

from optim import SplitSGD


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    dist.init_process_group(args.backend, timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    opt = SplitSGD(model.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    for step in range(args.steps):
        loss = model(torch.randn(8, 8)).pow(2).mean()
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
