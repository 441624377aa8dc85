"""Ranks fail in different ways at the same step while the others wait in all_reduce: one raises, one calls
sys.exit(3), one is killed by a signal. --plan says which rank does what and when (seconds after the step
starts), e.g. "1:raise:0,3:exit:0.3,2:abort:0.6": rank 1 fails first; the later failures land inside the
same torchrun monitor interval, so torchrun's summary lists them all. "3:skip:0": the step's all_reduce runs
on the other ranks only (as under `if rank != 3:`) while rank 3 stays busy; the others time out waiting.
"3:leave:0": rank 3 leaves the loop early and ends cleanly; the others lose their peer mid all_reduce.

Expected cause: peer_died_first (the first failing rank is the plan's earliest entry; the ranks that
are left only echo it).
"""
import argparse
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

SIGNALS = {"abort": signal.SIGABRT, "segv": signal.SIGSEGV, "kill": signal.SIGKILL}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", default="1:raise:0")
    parser.add_argument("--bad-step", type=int, default=2)
    args = parser.parse_args()
    plan = {int(r): (how, float(delay)) for r, how, delay in (p.split(":") for p in args.plan.split(","))}
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    for step in range(5):
        t = torch.randn(1024)
        if rank in plan and step == args.bad_step:
            how, delay = plan[rank]
            time.sleep(delay)
            if how == "raise":
                raise ValueError(f"bad batch at step {step}: labels contain NaN")
            if how == "skip":  # the step's all_reduce runs on the other ranks only; this one stays busy
                time.sleep(600)
            if how == "leave":  # leaves the loop early and ends cleanly (exit status 0)
                break
            if how == "exit":
                print(f"rank {rank}: giving up at step {step}", file=sys.stderr, flush=True)
                sys.exit(3)
            os.kill(os.getpid(), SIGNALS[how])
        dist.all_reduce(t)
        print(f"rank {rank} step {step}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
