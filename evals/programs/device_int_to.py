"""Moves the model to `local_rank` (an int) although the set-up bound `device` (cpu on a CPU run).

An integer means a GPU to torch: on a CPU (gloo) run every rank dies at `.to(local_rank)` with
`RuntimeError: Cannot access accelerator device when none is available.`; past it, resuming with
`map_location=loc` (`loc = f"cuda:{local_rank}"`) fails with `RuntimeError: Attempting to deserialize
object on a CUDA device but torch.cuda.is_available() is False.`
Expected cause: nccl_without_cuda (issue 7: the run is CPU, the code still addresses a GPU).
Fixed by the patch int_device.
"""
import os
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def load_snapshot(path: str, local_rank: int) -> dict:
    """Resume: the snapshot is mapped onto this rank's GPU through a local name."""
    loc = f"cuda:{local_rank}"
    return torch.load(path, map_location=loc)


def main() -> None:
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", timeout=timedelta(seconds=20))
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(local_rank)
    ckpt = os.path.join(tempfile.mkdtemp(), "init.pt")
    torch.save(model.state_dict(), ckpt)
    model.load_state_dict(torch.load(ckpt, map_location=f"cuda:{local_rank}"))
    model.load_state_dict(load_snapshot(ckpt, local_rank))
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    torch.manual_seed(1 + rank)
    for _ in range(2):
        loss = ddp(torch.randn(8, 4).to(local_rank)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
