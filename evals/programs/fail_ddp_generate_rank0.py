"""Train with DDP, then generate on rank 0 only through the DDP wrapper (a forward on one rank).

--then barrier (default): the other ranks wait at a barrier; both sides time out.
--then allreduce: the other ranks all_reduce a final metric, which gloo pairs with rank 0's buffer
broadcast: "Received data size doesn't match expected size".

Expected cause: rank_conditional_collective.
"""
import argparse
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--then", choices=["barrier", "allreduce"], default="barrier")
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=8))
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 16))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        loss = model(torch.randn(8, 16)).pow(2).mean()
        loss.backward()
        opt.step()
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if rank == 0:
        model.eval()
        x = torch.randn(1, 16)
        for _ in range(4):  # generation, on the master process only
            x = model(x)
        print("generated", x.shape, flush=True)
    if args.then == "barrier":
        dist.barrier()
    else:
        dist.all_reduce(torch.tensor([loss.item()]))  # final metric, on every rank
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
