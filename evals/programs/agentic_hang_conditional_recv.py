"""Train a small model with gloo; at --hang-step the ranks sync the learning-rate schedule."""
import argparse
from datetime import timedelta

import torch
import torch.distributed as dist


def sync_schedule(rank: int, world: int, resume: bool) -> float:
    lr = torch.tensor([0.1])
    if rank == 0 and resume:
        dist.send(lr, dst=world - 1)
    elif rank == world - 1:
        dist.recv(lr, src=0)
    return float(lr)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--hang-step", type=int, default=3)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    lr = 0.1
    for step in range(args.steps):
        if step == args.hang_step:
            lr = sync_schedule(rank, world, args.resume)
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
                p.grad = None
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    checksum = sum(float(p.detach().sum()) for p in model.parameters())
    dist.destroy_process_group()
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum:.6f}", flush=True)


if __name__ == "__main__":
    main()
