"""Ways a rank waits on the c10d store for a key nobody sets: torch 2.13 ends the wait with
"DistStoreError: wait timeout after <N>ms, keys: <the keys>" (gloo, CPU).

--variant key_never_set: rank 0 skips the store.set that rank 1's store.get waits for (a code path some ranks take)
--variant rank_late: rank 0 (--late-rank) spends longer than the timeout before init_process_group (slow pre-work on one rank)
--variant new_group_partial: only rank 0 calls dist.new_group (a collective call some ranks skip)
--variant peer_failed: the rank that was to set the key raises first (run as two torchrun "nodes", whose agents
    do not stop each other's workers: the waiting node's log shows only the timeout)
--variant barrier_oversized: every rank enters torch's store barrier (torch.distributed.elastic.utils.store.barrier)
    sized for one more member than there are ranks (a world size from the config, not from the job); with --traced
    the ranks pass their rank and torch names the members that never checked in
--variant world_oversized: every rank passes init_process_group a world_size one larger than the job (a number from
    the code, not the launcher's WORLD_SIZE); the ranks wait in the backend's start-up for a rank that never comes
--variant node_finishes_early: node 0's ranks return at once, node 1's rank fails later; node 0's torchrun agent
    waits in its exit barrier (300 s) for node 1's agent, which never checks in
"""
import argparse
import os
import time
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", required=True, choices=["key_never_set", "rank_late", "new_group_partial",
                                                              "peer_failed", "node_finishes_early",
                                                              "barrier_oversized", "world_oversized"])
    parser.add_argument("--traced", action="store_true", help="barrier_oversized: pass the rank (missing-rank trace)")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds")
    parser.add_argument("--late-rank", type=int, default=0, help="rank_late: the rank that starts late")
    args = parser.parse_args()
    timeout = timedelta(seconds=args.timeout)
    rank = int(os.environ["RANK"])
    if args.variant == "node_finishes_early":
        if rank == 1:
            time.sleep(5)
            raise RuntimeError("node 1 failed after node 0 had finished")
        return
    if args.variant == "rank_late" and rank == args.late_rank:
        time.sleep(args.timeout * 3)  # e.g. tokenising the data set on rank 0 only
    if args.variant == "world_oversized":
        world = int(os.environ["WORLD_SIZE"]) + 1  # e.g. counting a head node that runs no worker
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timeout)
        return
    dist.init_process_group("gloo", timeout=timeout)
    store = dist.distributed_c10d._get_default_store()
    if args.variant == "key_never_set":
        if rank == 0:
            skip = True  # e.g. "if not os.path.exists(ckpt): return" before publishing the step
            if not skip:
                store.set("ckpt_step", "100")
        else:
            store.get("ckpt_step")
    elif args.variant == "new_group_partial":
        if rank == 0:
            dist.new_group([0, 1], timeout=timeout)
        time.sleep(args.timeout * 3)
    elif args.variant == "barrier_oversized":
        from torch.distributed.elastic.utils.store import barrier

        configured = dist.get_world_size() + 1  # e.g. a world size read from a config written for another job
        barrier(store, configured, "ckpt_saved/", barrier_timeout=args.timeout, rank=rank if args.traced else None,
                trace_timeout=1)
    elif args.variant == "peer_failed":
        if rank == 1:
            raise RuntimeError("rank 1 failed before publishing its result")
        store.get("result_1")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
