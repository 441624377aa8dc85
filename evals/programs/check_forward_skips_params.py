"""DDP over a model whose forward uses its auxiliary head only for some inputs (no find_unused_parameters).

The first step whose input skips the head leaves its parameters without gradients; the next step fails with
"Expected to have finished reduction in the prior iteration". Checker: DD504 (a warning: whether the
branch is taken depends on the data). Expected cause: unused_parameters.
"""
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(4, 4)
        self.aux = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, use_aux: bool) -> torch.Tensor:
        y = self.body(x)
        if use_aux:
            y = y + self.aux(x)
        return y


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
    rank = dist.get_rank()
    model = DDP(Net())
    for step in range(3):
        model(torch.ones(2, 4), use_aux=step == 0).sum().backward()
    print(f"DISTDOCTOR_OK rank={rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
