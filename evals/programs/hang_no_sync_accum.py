"""Gradient accumulation with DistributedDataParallel: micro-batches inside `model.no_sync()` accumulate locally and
every third one syncs in its backward (the reducer's all_reduce). Each rank's micro-batches are the chunks of its own
documents (9 chunks on rank 0, 6 on rank 1), so rank 0 syncs three times and rank 1 twice: rank 0 waits in its third
synced backward while rank 1 has left the loop and waits in the barrier. The counts come from the data lengths;
no test reads the rank. 2 ranks.
Expected: odd rank 0 (the rank whose stack is inside the loop the other left), cause dataloader_uneven, location:
the `for i, x in enumerate(micro_batches):` line.
"""
import contextlib
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

DOC_CHUNKS = [3, 2, 4, 2, 2, 2]  # chunks per document; documents are dealt out round-robin
ACCUM = 3


def micro_batches_of(rank: int, world: int) -> list[torch.Tensor]:
    chunks = sum(DOC_CHUNKS[rank::world])
    return [torch.randn(2, 8) for _ in range(chunks)]


def accumulate(model: DDP, micro_batches: list[torch.Tensor], opt: torch.optim.Optimizer) -> int:
    """Backward on every micro-batch, syncing gradients every ACCUM-th; returns the optimizer steps taken."""
    steps = 0
    for i, x in enumerate(micro_batches):
        sync = (i + 1) % ACCUM == 0
        with contextlib.nullcontext() if sync else model.no_sync():
            model(x).pow(2).mean().backward()
        if sync:
            opt.step()
            opt.zero_grad()
            steps += 1
    return steps


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    steps = accumulate(model, micro_batches_of(rank, world), opt)
    dist.barrier()
    print(f"rank {rank}: {steps} optimizer steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
