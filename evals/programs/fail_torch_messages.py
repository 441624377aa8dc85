"""Mistakes that make torch 2.13's distributed stack raise its own messages on a CPU machine (gloo).

--variant premul_sum: an all_reduce with ReduceOp.PREMUL_SUM (what NCCL-only code uses) on gloo
    -> "Cannot use ReduceOp.PREMUL_SUM with Gloo"                          (gloo_missing_feature)
--variant store_host_died: launched without torchrun (env://), rank 0 hosts the TCPStore and dies; rank 1's
    next store call -> "Failed to recv, got 0 bytes. Connection was likely closed."  (peer_died_first, an echo)
--variant local_rank_env: `python train.py` with RANK/WORLD_SIZE but no launcher, asking for the node-local rank
    -> "LOCAL_RANK is not in the environment."                             (single_process_launch)
--variant mpi_backend: init_process_group("mpi") on a pip wheel
    -> "Distributed package doesn't have MPI built in."                    (mpi_launcher_env)
--variant fsdp_no_accelerator: FSDP of a CPU module without device_id on a machine without GPUs
    -> "FSDP needs a non-CPU accelerator device"                           (nccl_without_cuda)
--variant uneven_join: DDP under the Join context manager, rank 0 with 1010 batches and rank 1 with 3: it finishes,
    warning "Detected uneven input skew of greater than 1000"               (dataloader_uneven)
--variant allgather_sizes / reduce_scatter_sizes / all_to_all_sizes: rank 0 brings 4 elements and rank 1 brings 8
    to buffers sized for 4 per rank; gloo checks the local sizes and rank 1 (or 0) fails with
    "ProcessGroupGloo::allgather: invalid tensor size", "Check failed: outputShape[0] * worldSize == inputShape[0]"
    or "in->size == out->size"                                               (collective_shape_mismatch)
--variant ok: does nothing wrong (for launcher flags that fail before the script runs).
"""
import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", required=True, choices=["premul_sum", "store_host_died", "local_rank_env",
                                                              "mpi_backend", "fsdp_no_accelerator", "uneven_join",
                                                              "allgather_sizes", "reduce_scatter_sizes",
                                                              "all_to_all_sizes", "ok"])
    args = parser.parse_args()
    timeout = timedelta(seconds=20)
    if args.variant == "ok":
        return
    if args.variant == "mpi_backend":
        dist.init_process_group("mpi", timeout=timeout)
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    if args.variant == "premul_sum":
        dist.all_reduce(torch.ones(4), op=dist._make_nccl_premul_sum(1.0 / dist.get_world_size()))
    elif args.variant == "store_host_died":
        store = dist.distributed_c10d._get_default_store()
        if rank == 0:
            os._exit(1)  # the process that hosts the store is gone, as after a crash or an OOM kill
        time.sleep(1)
        store.get("step_done")
    elif args.variant == "local_rank_env":
        print("local rank", dist.get_node_local_rank(), flush=True)
    elif args.variant == "fsdp_no_accelerator":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        FSDP(torch.nn.Linear(4, 4))
    elif args.variant == "uneven_join":
        from torch.distributed.algorithms.join import Join
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(torch.nn.Linear(2, 2))
        with Join([model]):  # the ranks that run out shadow the others' all-reduces
            for _ in range(1010 if rank == 0 else 3):
                model(torch.randn(1, 2)).sum().backward()
    elif args.variant.endswith("_sizes"):
        mine = torch.ones(4 if rank == 0 else 8)  # e.g. per-rank predictions of different lengths
        world = dist.get_world_size()
        if args.variant == "allgather_sizes":
            dist.all_gather_into_tensor(torch.zeros(4 * world), mine)
        elif args.variant == "reduce_scatter_sizes":
            dist.reduce_scatter_tensor(mine, torch.ones(4 * world))
        else:
            dist.all_to_all_single(torch.zeros(8), mine)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
