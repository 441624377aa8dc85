"""Broken on CPU: a DDP-tutorial style trainer (LOCAL_RANK, a minimum GPU count check, NCCL set-up).

Run: torchrun --standalone --nproc_per_node=2 backend_ddp_tutorial.py
Without GPUs it prints that it cannot find them and exits 0 on every rank having trained nothing;
patched by cuda_requirements + gloo_backend + ddp_cpu_args. Also carries the issue-7 backend shapes:
a backend from argparse (`args.dist_backend`), a compound "cpu:gloo,cuda:nccl" string, and a backend
from a call with a parameter default.
"""
import argparse
import os
import sys
from datetime import timedelta

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group, new_group
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def verify_min_gpu_count(min_gpus: int = 2) -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() >= min_gpus


def metrics_backend(default="nccl"):
    return os.environ.get("TUTORIAL_METRICS_BACKEND", default)


def ddp_setup(args):
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    init_process_group(backend=args.dist_backend, timeout=timedelta(seconds=60))


class Trainer:
    def __init__(self, model, total_epochs):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.global_rank = int(os.environ["RANK"])
        self.gpu_id = self.global_rank % torch.cuda.device_count()
        self.device = torch.device("cuda", self.gpu_id) if torch.cuda.is_available() else torch.device("cpu")
        self.model = model.to(self.device)
        self.model = DDP(self.model, device_ids=[self.gpu_id], output_device=self.gpu_id)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.total_epochs = total_epochs
        self.stats_group = new_group(backend="cpu:gloo,cuda:nccl")
        self.metrics_group = new_group(backend=metrics_backend())

    def train(self):
        gen = torch.Generator().manual_seed(self.global_rank)
        for epoch in range(self.total_epochs):
            source = torch.randn(8, 10, generator=gen).to(self.device)
            target = torch.randn(8, 1, generator=gen).to(self.device)
            self.optimizer.zero_grad()
            loss = F.mse_loss(self.model(source), target)
            loss.backward()
            self.optimizer.step()
            total = loss.detach().clone()
            dist.all_reduce(total, group=self.stats_group)
            dist.all_reduce(total, group=self.metrics_group)
            if self.global_rank == 0:
                print(f"epoch {epoch}: summed loss {total.item():.4f}", flush=True)


def main(args):
    ddp_setup(args)
    torch.manual_seed(0)
    trainer = Trainer(nn.Linear(10, 1), args.total_epochs)
    trainer.train()
    checksum = sum(p.detach().double().sum().item() for p in trainer.model.parameters())
    print(f"DISTDOCTOR_OK rank={trainer.global_rank} checksum={checksum!r}", flush=True)
    dist.barrier()  # no rank tears gloo down while a peer still talks to it
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("--total-epochs", type=int, default=3)
    parser.add_argument("--dist-backend", default="nccl")
    args = parser.parse_args()
    _min_gpu_count = 2
    if not verify_min_gpu_count(min_gpus=_min_gpu_count):
        print(f"Cannot find {_min_gpu_count} GPUs for this example; exiting.")
        sys.exit()
    main(args)
