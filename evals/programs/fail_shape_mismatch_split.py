"""Context parallelism: a sequence of odd length is split across ranks with tensor_split, no padding.

Each rank embeds its own slice, then every rank all_gathers the slices into one buffer sized from its own
slice (world * local length). Every rank runs the same collective at the same point, but rank 0's slice is one
token longer than rank 1's, so the sizes differ. Not a rank-conditional collective.
Expected cause: collective_shape_mismatch.
"""
import argparse
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq-len", type=int, default=2871)  # odd: 2 ranks get 1436 and 1435 tokens
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=5))
    rank, world = dist.get_rank(), dist.get_world_size()
    tokens = torch.arange(args.seq_len)
    local = tokens.tensor_split(world)[rank]  # uneven when seq_len % world != 0
    features = torch.nn.functional.one_hot(local % 16, 16).float()  # [local_len, 16]
    print(f"rank {rank}: local sequence slice {tuple(features.shape)}", flush=True)
    gathered = torch.empty(world * features.shape[0], 16)
    dist.all_gather_into_tensor(gathered, features)
    print(f"rank {rank}: gathered {tuple(gathered.shape)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
