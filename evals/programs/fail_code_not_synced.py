"""Ranks build the model from their node's copy of the config; one node's copy is stale (not synced).

Here the two "nodes" are two local ranks reading --config-dir/node<RANK>.json: rank 1's copy has an
older, smaller model. Expected cause: environment_mismatch (code/config not synced across nodes).
"""
import argparse
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config-dir", required=True)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    with open(os.path.join(args.config_dir, f"node{rank}.json"), encoding="utf-8") as f:
        config = json.load(f)
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    print(f"rank {rank}: config {config}", flush=True)
    layers = [torch.nn.Linear(config["width"], config["width"]) for _ in range(config["n_layer"])]
    model = DDP(torch.nn.Sequential(*layers))
    model(torch.randn(2, config["width"])).sum().backward()
    print(f"rank {rank}: step done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
