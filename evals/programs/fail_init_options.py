"""Process-group calls that torch 2.13 refuses for the backend or build at hand, on a CPU machine.

--variant monitored_barrier_not_gloo: dist.monitored_barrier() on a process group whose backend is not gloo (torch's
    own test backend "fake" stands in for NCCL, which this CPU machine cannot start)
    -> "monitored_barrier is only implemented for GLOO backend."          (backend_missing_collective)
--variant device_id_int: init_process_group(device_id=LOCAL_RANK), GPU code, with a torch build that has no accelerator
    -> "device_id is an int, but no accelerator support is found"         (nccl_without_cuda)
"""
import argparse
import os
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", required=True, choices=["monitored_barrier_not_gloo", "device_id_int"])
    args = parser.parse_args()
    timeout = timedelta(seconds=20)
    if args.variant == "device_id_int":
        dist.init_process_group("gloo", timeout=timeout, device_id=int(os.environ["LOCAL_RANK"]))
    else:
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", store=FakeStore(), rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]))
        dist.monitored_barrier(timeout=timeout)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
