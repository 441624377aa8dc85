"""Rank 0 alone all_reduces a metric for logging; the other ranks never join that collective.

--then sleep (default): the other ranks go on with work that is not a collective, so rank 0 times out.
--then exit: the other ranks finish and exit, so rank 0 sees gloo "Connection closed by peer", which
looks like a peer crash although no peer failed.
--then broadcast: the other ranks go on to the next collective (a broadcast of the weights), which
gloo pairs with rank 0's all_reduce.
Expected cause: rank_conditional_collective.
"""
import argparse
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--then", choices=["sleep", "exit", "broadcast"], default="sleep")
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
    rank = dist.get_rank()
    loss = torch.tensor([float(rank + 1)])
    print(f"rank {rank}: training done", flush=True)
    if rank == 0:
        dist.all_reduce(loss)  # only rank 0 gets here
        print(f"mean loss {loss.item() / dist.get_world_size():.3f}", flush=True)
    elif args.then == "sleep":
        time.sleep(12)  # the other ranks go on with work that is not a collective
    if args.then == "broadcast":
        weights = torch.zeros(1000)
        dist.broadcast(weights, src=0)  # every rank: sync weights before the next epoch
    print(f"rank {rank}: exiting", flush=True)
    if args.then != "exit":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
