"""Each rank evaluates its own slice of a 101-sample validation set (split rank::world, no padding); the
metric sync then passes per-rank tensors whose sizes depend on that slice.

--collective all_gather (default): the per-sample losses are all_gathered into buffers shaped like the local
losses (rank 0 has 51 samples, rank 1 has 50).
--collective all_reduce: per-class prediction counts from torch.bincount without minlength are summed; the
count tensor is as long as the largest class a rank happened to predict.
--collective broadcast: rank --src broadcasts its shuffled sample order; every rank allocates the buffer from
its own slice length. With --src 1 the 50-element order lands in rank 0's 51-element buffer: gloo does not
complain, and rank 0's last element is left uninitialised (silently wrong).
Every rank runs the same collective at the same point; only the tensor sizes differ.
Expected cause: collective_shape_mismatch.
"""
import argparse
from datetime import timedelta

import torch
import torch.distributed as dist

SAMPLES = 101


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--collective", choices=["all_gather", "all_reduce", "broadcast"], default="all_gather")
    parser.add_argument("--src", type=int, default=0, help="the broadcasting rank")
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    inputs, labels = torch.randn(SAMPLES, 8), torch.randint(0, 5, (SAMPLES,))
    model = torch.nn.Linear(8, 5 - rank)  # stands in for a model whose predictions differ per shard
    x, y = inputs[rank::world], labels[rank::world]  # rank 0: 51 samples, rank 1: 50
    with torch.no_grad():
        logits = model(x)
    print(f"rank {rank}: evaluated {len(x)} samples", flush=True)
    if args.collective == "all_gather":
        losses = torch.nn.functional.cross_entropy(logits, y.clamp(max=logits.shape[1] - 1), reduction="none")
        everything = [torch.empty_like(losses) for _ in range(world)]
        dist.all_gather(everything, losses)
        print(f"rank {rank}: mean loss {torch.cat(everything).mean().item():.4f}", flush=True)
    elif args.collective == "all_reduce":
        counts = torch.bincount(logits.argmax(dim=1))  # no minlength: as long as the largest class predicted
        dist.all_reduce(counts)
        print(f"rank {rank}: predicted class counts {counts.tolist()}", flush=True)
    else:
        order = torch.randperm(len(x)) if rank == args.src else torch.empty(len(x), dtype=torch.long)
        dist.broadcast(order, src=args.src)
        print(f"rank {rank}: order of {len(order)} samples, first {order[:4].tolist()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
