"""A small DDP training job for the launch tests (gloo on CPU, or NCCL when --backend nccl).

Reads RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT from the environment (torchrun, or srun
with them mapped), trains a tiny model for --steps steps, checks every rank ends with the same weights and
prints `DDP OK world=<n>` on rank 0. `--die-rank R --die-step K` makes rank R exit with an error at step K
(a task that dies), `--hang-rank R` makes rank R sleep instead of training (a rank that hangs).
"""
import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import distdoctor.tracer as T  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--die-rank", type=int, default=-1)
    ap.add_argument("--die-step", type=int, default=2)
    ap.add_argument("--hang-rank", type=int, default=-1)
    ap.add_argument("--watchdog", type=float, default=0.0)
    args = ap.parse_args()
    if args.watchdog:
        T.watchdog(args.watchdog)
    T.checkpoint("start")
    dist.init_process_group(args.backend, timeout=timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    T.checkpoint("process group ready")
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    T.checkpoint("model wrapped in DDP")
    if rank == args.hang_rank:
        T.checkpoint("this rank hangs")
        time.sleep(3600)
    for step in range(args.steps):
        if rank == args.die_rank and step == args.die_step:
            raise RuntimeError(f"rank {rank} failed at step {step} (injected by --die-rank)")
        torch.manual_seed(100 + rank * 1000 + step)
        x, y = torch.randn(16, 8), torch.randn(16, 2)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        T.checkpoint(f"step {step} loss {loss.item():.4f}")
    weights = torch.cat([p.detach().flatten() for p in model.parameters()])
    gathered = [torch.empty_like(weights) for _ in range(world)]
    dist.all_gather(gathered, weights)
    same = all(torch.equal(gathered[0], g) for g in gathered)
    if rank == 0:
        print(f"DDP OK world={world} steps={args.steps} weights_equal={same}" if same else
              f"DDP WEIGHTS DIFFER world={world}", flush=True)
    dist.barrier()  # no rank tears gloo down while a peer still talks to it
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
