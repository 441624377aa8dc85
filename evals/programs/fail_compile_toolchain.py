"""torch.compile of a correct model on a node whose C++ compiler (CXX) is missing or broken.

Run with CXX pointing at a compiler that does not work: inductor cannot build its CPU kernels.
Expected cause: compile_toolchain (an environment problem, not a model problem).
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)))
    out = model(torch.randn(8, 16))
    print("rank", dist.get_rank(), "out", tuple(out.shape), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
