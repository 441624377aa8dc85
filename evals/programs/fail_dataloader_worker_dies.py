"""A DataLoader worker of rank 1 dies while the ranks train (gloo, CPU); torch 2.13 reports it in the main process.

--how exit: the worker process exits (os._exit(1), as a C extension calling exit() would)
    -> "DataLoader worker (pid(s) N) exited unexpectedly"
--how segv: the worker crashes in native code (SIGSEGV)  -> "DataLoader worker (pid N) is killed by signal: Segmentation fault."
--how kill: the worker is killed (SIGKILL, as the kernel's OOM killer does)  -> "... is killed by signal: Killed."
"""
import argparse
import os
import signal

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, how: str, rank: int) -> None:
        self.how, self.rank = how, rank

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.rank == 1 and i == 20:
            if self.how == "exit":
                os._exit(1)
            os.kill(os.getpid(), signal.SIGSEGV if self.how == "segv" else signal.SIGKILL)
        return torch.full((4,), float(i))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--how", choices=["exit", "segv", "kill"], required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    loader = DataLoader(Samples(args.how, rank), batch_size=4, num_workers=2)
    for batch in loader:
        dist.all_reduce(batch)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
