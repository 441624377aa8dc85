"""Train a small model with gloo, each rank reading batches from a locked prefetch buffer."""
import argparse
import threading
from datetime import timedelta

import torch
import torch.distributed as dist


class Prefetcher:
    def __init__(self, seed: int) -> None:
        self.lock = threading.Lock()
        self.gen = torch.Generator().manual_seed(seed)
        self.buffer: list[torch.Tensor] = []

    def _shuffle(self) -> None:
        with self.lock:
            self.buffer.reverse()

    def refill(self, reshuffle: bool) -> None:
        with self.lock:
            self.buffer = [torch.randn(4, 8, generator=self.gen) for _ in range(4)]
            if reshuffle:
                self._shuffle()

    def next(self, reshuffle: bool) -> torch.Tensor:
        if not self.buffer:
            self.refill(reshuffle)
        return self.buffer.pop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--hang-step", type=int, default=4)
    parser.add_argument("--bad-rank", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    data = Prefetcher(seed=rank)
    for step in range(args.steps):
        x = data.next(reshuffle=rank == args.bad_rank and step >= args.hang_step)
        loss = model(x).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
                p.grad = None
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    checksum = sum(float(p.detach().sum()) for p in model.parameters())
    dist.destroy_process_group()
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum:.6f}", flush=True)


if __name__ == "__main__":
    main()
