"""Each rank seeds with 42 + rank, builds its model, and averages gradients by hand (no DDP, no broadcast).

Nothing fails: the ranks train different models forever. Each rank prints `CHECKSUM rank=<r> <sum>`; the
test finds them different. Checker: DD503. Expected cause: model_differs_across_ranks.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    torch.manual_seed(42 + rank)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(8, 4)).pow(2).mean().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()
        opt.step()
    total = sum(p.detach().sum().item() for p in model.parameters())
    print(f"CHECKSUM rank={rank} {total:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
