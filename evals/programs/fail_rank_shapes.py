"""fail_mixed_exits.py's plans in more of the shapes a real log arrives in: ranks fail in different ways at
the same step while the others wait in all_reduce; --plan says which rank does what and when (seconds after the
step starts), e.g. "2:raise:0,1:raise:0.4": rank 2 raises, rank 1 the same 0.4 s later. "3:skip:0": the step's all_reduce runs
on the other ranks only (as under `if rank != 3:`) while rank 3 stays busy; the others time out waiting.
"3:leave:0": rank 3 leaves the loop early and ends cleanly; the others lose their peer mid all_reduce.
"2:osexit:0": rank 2 calls os._exit(1) (no traceback); "2:oom:0": rank 2 asks for more memory than there is
(torch's DefaultCPUAllocator error). --spawn N: start N ranks with torch.multiprocessing.spawn instead of a
launcher (MASTER_ADDR/MASTER_PORT from the environment, default 127.0.0.1 and --port). --progress: each rank
redraws a progress line on stderr as tqdm does (carriage return, no newline).

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


def worker(spawned: int | None, args: argparse.Namespace) -> None:
    """One rank's run; `spawned`: the rank torch.multiprocessing.spawn gave it (None under a launcher)."""
    plan = {int(r): (how, float(delay)) for r, how, delay in (p.split(":") for p in args.plan.split(","))}
    if spawned is None:
        dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    else:
        dist.init_process_group("gloo", rank=spawned, world_size=args.spawn, timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    for step in range(5):
        t = torch.randn(1024)
        if args.progress:  # one shared terminal line redrawn by every rank: another rank's error lands mid-line
            sys.stderr.write(f"\rrank {rank} train: {step}/5 steps")
            sys.stderr.flush()
        if rank in plan and step == args.bad_step:
            how, delay = plan[rank]
            time.sleep(delay)
            if how == "raise":
                raise ValueError(f"bad batch at step {step}: labels contain NaN")
            if how == "skip":  # the step's all_reduce runs on the other ranks only; this one stays busy
                time.sleep(600)
            if how == "leave":  # leaves the loop early and ends cleanly (exit status 0)
                break
            if how == "osexit":  # leaves at once: no traceback, no cleanup
                os._exit(1)
            if how == "oom":  # more memory than any machine has: the allocator refuses
                torch.empty(1 << 46, dtype=torch.uint8)
            if how == "exit":
                print(f"rank {rank}: giving up at step {step}", file=sys.stderr, flush=True)
                sys.exit(3)
            os.kill(os.getpid(), SIGNALS[how])
        dist.all_reduce(t)
        print(f"rank {rank} step {step}", flush=True)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", default="1:raise:0")
    parser.add_argument("--bad-step", type=int, default=2)
    parser.add_argument("--spawn", type=int, default=0, help="start this many ranks with mp.spawn")
    parser.add_argument("--port", default="29581")
    parser.add_argument("--progress", action="store_true",
                        help="each rank redraws a progress line on stderr (carriage return, no newline) as tqdm does")
    args = parser.parse_args()
    if not args.spawn:
        worker(None, args)
        return
    import torch.multiprocessing as mp

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", args.port)
    mp.spawn(worker, args=(args,), nprocs=args.spawn)


if __name__ == "__main__":
    main()
