"""A tiny GPT written for CUDA machines: flash-attn is imported at module level and called unconditionally.

On a CPU run (gloo) every rank dies at import with `ModuleNotFoundError: No module named 'flash_attn'`.
Expected cause: flash_attn_on_cpu.  Fixed by the patch sdpa_force (then run with <PREFIX>_FORCE_SDPA=1).
"""
from datetime import timedelta

import torch
import torch.distributed as dist
from flash_attn import flash_attn_func
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).unbind(2)  # (B, T, H, D) each
        y = flash_attn_func(q, k, v, causal=True)
        return self.proj(y.reshape(b, t, c))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 32, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.attn = Attention(dim, heads)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        return self.head(x + self.attn(x))


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(TinyGPT())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(3):
        idx = torch.randint(0, 32, (4, 8), generator=gen)
        loss = nn.functional.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"DISTDOCTOR_OK rank={rank} checksum={checksum!r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
