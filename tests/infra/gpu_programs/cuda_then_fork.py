"""CUDA is used in the parent, then a worker started with fork touches CUDA again."""
import multiprocessing as mp

import torch


def worker() -> None:
    torch.zeros(1, device="cuda")


if __name__ == "__main__":
    torch.zeros(1, device="cuda")  # CUDA initialised before the fork
    proc = mp.get_context("fork").Process(target=worker)
    proc.start()
    proc.join()
    raise SystemExit(proc.exitcode)
