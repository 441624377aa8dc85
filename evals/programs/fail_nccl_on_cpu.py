"""A training script that asks for NCCL (or a CUDA device) on a machine without CUDA.

--variant nccl: init_process_group("nccl") then an all_reduce of a CPU tensor.
--variant compound: init_process_group("cpu:gloo,cuda:nccl") then all_reduce of a CUDA-less tensor.
--variant device_id: init_process_group("gloo", device_id=torch.device("cuda", local_rank)).
--variant ddp_device_ids: DDP(cpu_module, device_ids=[local_rank]).
Expected cause: nccl_without_cuda.
"""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", choices=["nccl", "compound", "device_id", "ddp_device_ids"], default="nccl")
    args = parser.parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    timeout = timedelta(seconds=10)
    if args.variant == "nccl":
        dist.init_process_group("nccl", timeout=timeout)
    elif args.variant == "compound":
        dist.init_process_group("cpu:gloo,cuda:nccl", timeout=timeout)
    elif args.variant == "device_id":
        dist.init_process_group("gloo", timeout=timeout, device_id=torch.device("cuda", local_rank))
    else:
        dist.init_process_group("gloo", timeout=timeout)
        model = DDP(torch.nn.Linear(4, 4), device_ids=[local_rank])
        model(torch.randn(2, 4)).sum().backward()
    t = torch.ones(4)
    if args.variant == "compound":
        t = torch.ones(4, device="cuda" if torch.cuda.is_available() else "cpu")
    dist.all_reduce(t)
    print("rank", dist.get_rank(), "sum", t.tolist(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
