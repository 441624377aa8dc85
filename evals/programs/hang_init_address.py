"""Each rank builds its rendezvous address from its own node's settings, and rank 1's names another port: rank 0
serves the store on one port and waits for rank 1, which keeps trying a port where nothing listens. Run with 2
ranks. Expected: no odd rank, cause rendezvous_unreachable, location: the init_process_group line.
"""
import os
import socket

import torch
import torch.distributed as dist


def node_port() -> int:
    """The port this node's settings give (a stale per-node config: each node picks its own)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    address = f"tcp://127.0.0.1:{node_port()}"
    dist.init_process_group("gloo", init_method=address, rank=rank, world_size=world)
    total = torch.ones(1)
    dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
