"""A model whose config picks the flash-attention kernel by default, as set up for GPU training.

`attn_impl = "flash"` calls `torch.ops.aten._scaled_dot_product_flash_attention`, a CUDA-only kernel; on a
CPU run (gloo) it raises `NotImplementedError: Could not run 'aten::_scaled_dot_product_flash_attention'
with arguments from the 'CPU' backend`.
Expected cause: flash_attn_on_cpu.  Fixed by the patch sdpa_force (then run with <PREFIX>_FORCE_SDPA=1).
"""
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class Config:
    vocab: int = 32
    dim: int = 16
    heads: int = 2
    attn_impl: str = "flash"  # "flash" on the GPU cluster, "sdpa" elsewhere


class Attention(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.cfg.heads, c // self.cfg.heads).permute(2, 0, 3, 1, 4)
        if self.cfg.attn_impl == "flash":
            y = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, is_causal=True)[0]
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(b, t, c)


class TinyGPT(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.emb = nn.Embedding(cfg.vocab, cfg.dim)
        self.attn = Attention(cfg)
        self.head = nn.Linear(cfg.dim, cfg.vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        return self.head(x + self.attn(x))


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TinyGPT(Config()))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(3):
        idx = torch.randint(0, 32, (4, 8), generator=gen)
        loss = F.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
