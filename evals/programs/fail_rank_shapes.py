"""fail_mixed_exits.py's plans in more of the shapes a real log arrives in: ranks fail in different ways at
the same step while the others wait in all_reduce; --plan says which rank does what and when (seconds after the
step starts), e.g. "2:raise:0,1:raise:0.4": rank 2 raises, rank 1 the same 0.4 s later. "3:skip:0": the step's all_reduce runs
on the other ranks only (as under `if rank != 3:`) while rank 3 stays busy; the others time out waiting.
"3:leave:0": rank 3 leaves the loop early and ends cleanly; the others lose their peer mid all_reduce.
"2:osexit:0": rank 2 calls os._exit(1) (no traceback); "2:oom:0": rank 2 asks for more memory than there is
(torch's DefaultCPUAllocator error). --spawn N: start N ranks with torch.multiprocessing.spawn instead of a
launcher (MASTER_ADDR/MASTER_PORT from the environment, default 127.0.0.1 and --port). --progress: each rank
redraws a progress line on stderr as tqdm does (carriage return, no newline).
"1:oomchain:0": rank 1's allocation fails and the program re-raises it as `RuntimeError(...) from e` (the root
error is the FIRST exception printed); "1:oomduring:0": the same, raised inside the except block (no `from`);
"1:dlraise:0": rank 1's DataLoader worker raises (torch re-raises "Caught ValueError in DataLoader worker
process 0" in the rank). --warn N: each rank first emits N UserWarnings (noise). --log-style logging|json:
every rank logs through a `logging` handler ("%(asctime)s - %(name)s - %(levelname)s - ", or one JSON object
a line with the rank and the traceback as fields, as log collectors keep them) and logs its own failure
(logger.exception) before exiting 1.

Expected cause: peer_died_first (the first failing rank is the plan's earliest entry; the ranks that
are left only echo it).
"""
import argparse
import json
import logging
import os
import signal
import sys
import time
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist

SIGNALS = {"abort": signal.SIGABRT, "segv": signal.SIGSEGV, "kill": signal.SIGKILL}
LOG = logging.getLogger("trainer")


class BadRecords(torch.utils.data.Dataset):
    """A dataset whose item 3 cannot be read (the error is raised inside a DataLoader worker process)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 3:
            raise ValueError(f"record {i} is truncated: expected 1024 floats, got 17")
        return torch.randn(1024)


class JsonLines(logging.Formatter):
    """One JSON object a record: time, level, logger, rank, message and the traceback as one string field."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
               "rank": self.rank, "msg": record.getMessage()}
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup_logging(style: str, rank: int) -> None:
    """Every record of this rank through one stderr handler in the given style."""
    handler = logging.StreamHandler(sys.stderr)
    if style == "json":
        handler.setFormatter(JsonLines(rank))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


def worker(spawned: int | None, args: argparse.Namespace) -> None:
    """One rank's run; `spawned`: the rank torch.multiprocessing.spawn gave it (None under a launcher)."""
    plan = {int(r): (how, float(delay)) for r, how, delay in (p.split(":") for p in args.plan.split(","))}
    if spawned is None:
        dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    else:
        dist.init_process_group("gloo", rank=spawned, world_size=args.spawn, timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    if args.log_style != "none":
        setup_logging(args.log_style, rank)
        try:
            steps(rank, plan, args)
        except Exception:
            LOG.exception("rank %d: training failed", rank)
            sys.exit(1)
    else:
        steps(rank, plan, args)
    dist.destroy_process_group()


def oom() -> None:
    """More memory than any machine has: the allocator refuses."""
    torch.empty(1 << 46, dtype=torch.uint8)


def steps(rank: int, plan: dict, args: argparse.Namespace) -> None:
    """The training loop: the plan's failure at --bad-step, an all_reduce a step otherwise."""
    if args.warn:
        warnings.simplefilter("always")
        for i in range(args.warn):
            warnings.warn(f"batch {i}: padding token id not set, using eos_token_id")
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
                oom()
            if how == "oomchain":
                try:
                    oom()
                except RuntimeError as e:
                    raise RuntimeError(f"rank {rank}: forward pass failed at step {step}") from e
            if how == "oomduring":
                try:
                    oom()
                except RuntimeError:
                    raise RuntimeError(f"rank {rank}: forward pass failed at step {step}")
            if how == "dlraise":
                for _ in torch.utils.data.DataLoader(BadRecords(), batch_size=2, num_workers=1):
                    pass
            if how == "exit":
                print(f"rank {rank}: giving up at step {step}", file=sys.stderr, flush=True)
                sys.exit(3)
            os.kill(os.getpid(), SIGNALS[how])
        dist.all_reduce(t)
        if args.log_style != "none":
            LOG.info("step %d done", step)
        else:
            print(f"rank {rank} step {step}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", default="1:raise:0")
    parser.add_argument("--bad-step", type=int, default=2)
    parser.add_argument("--spawn", type=int, default=0, help="start this many ranks with mp.spawn")
    parser.add_argument("--port", default="29581")
    parser.add_argument("--progress", action="store_true",
                        help="each rank redraws a progress line on stderr (carriage return, no newline) as tqdm does")
    parser.add_argument("--warn", type=int, default=0, help="emit this many UserWarnings first on every rank")
    parser.add_argument("--log-style", choices=["none", "logging", "json"], default="none")
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
