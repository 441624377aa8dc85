"""Every rank creates the shared output/cache directory after checking that it does not exist.

Expected cause: download_race (FileExistsError on the ranks that lose the race).
"""
import argparse
import os
import time
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=10))
    rank = dist.get_rank()
    cache = os.path.join(args.out, "tokenizer_cache")
    dist.barrier()  # all ranks reach the check together, as they do right after start-up
    if not os.path.exists(cache):
        time.sleep(0.2)  # downloading the tokenizer files takes a moment
        os.makedirs(cache)
    print("rank", rank, "cache ready", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
