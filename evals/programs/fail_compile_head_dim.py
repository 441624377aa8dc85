"""torch.compile of an attention block whose head_dim does not divide the hidden size (a config error).

Expected cause: shape_config_error (dynamo reports it while tracing with fake tensors).
"""
import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist


class Attention(torch.nn.Module):
    def __init__(self, d_model: int, head_dim: int) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.qkv = torch.nn.Linear(d_model, 3 * d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, -1, self.head_dim).transpose(1, 2)
        k = k.view(B, T, -1, self.head_dim).transpose(1, 2)
        v = v.view(B, T, -1, self.head_dim).transpose(1, 2)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y.transpose(1, 2).reshape(B, T, -1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--d-model", type=int, default=104)
    parser.add_argument("--head-dim", type=int, default=12)  # 104 is not a multiple of 12
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    model = torch.compile(Attention(args.d_model, args.head_dim))
    out = model(torch.randn(2, 16, args.d_model))
    print("rank", dist.get_rank(), "out", tuple(out.shape), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
