"""torch.compile on the GPU with CC pointing at a compiler that is not there (a container without gcc)."""
import torch


@torch.compile
def step(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * 2 + x.sin()


print(step(torch.randn(1024, device="cuda")).sum().item())
