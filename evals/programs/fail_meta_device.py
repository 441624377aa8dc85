"""A model built on the meta device (for a fast init) is never materialised (no to_empty/load), then fed CPU inputs.

Expected cause: device_mismatch (on a CPU-only build the text is "Tensor on device meta is not on the
expected device cpu!"; with CUDA it is "Expected all tensors to be on the same device").
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))
    x = torch.randn(2, 16)  # the batch is created on the CPU
    out = model(x)
    print("rank", dist.get_rank(), "out", tuple(out.shape), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
