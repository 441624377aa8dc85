"""A minimal job: init_process_group (env:// rendezvous on MASTER_PORT) and one all_reduce.

Run it while something else listens on the port to get port_in_use.
"""
from datetime import timedelta

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    t = torch.ones(1)
    dist.all_reduce(t)
    print("rank", dist.get_rank(), "world", t.item(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
