"""A pipeline-style exchange where the sender skips some steps: rank 0 sends its activations on even steps
only, rank 1 receives on every step.

Rank 0 finishes its loop, destroys the group and exits cleanly; rank 1 is still in `dist.recv` for step 1 and
gloo reports the closed socket ("Connection closed by peer", or, when the socket is reset first, "Read error
... Connection reset by peer"). torchrun lists rank 1 only. Run with 2 ranks.
Expected: rank_conditional_collective (a point-to-point op on some ranks only), first failure rank 1.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    for step in range(4):
        activations = torch.zeros(4)
        if rank == 0:
            if step % 2 == 0:  # the bug: the receiver expects a message every step
                dist.send(torch.ones(4), dst=1)
        else:
            dist.recv(activations, src=0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
