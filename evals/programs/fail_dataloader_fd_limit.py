"""DataLoader workers hand every batch to the main process through file descriptors (torch.multiprocessing's
default `file_descriptor` sharing strategy on Linux); the training loop keeps each batch (a cache of seen
batches), so every received tensor keeps its descriptor open until the process hits `ulimit -n`.

Run under a low open-files limit, e.g.
    bash -c 'ulimit -n 128; OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node=2 evals/programs/fail_dataloader_fd_limit.py'
With 4 workers per rank (the default) torch's DataLoader says "Too many open files. Communication with the
workers is no longer possible"; with `--workers 2` the descriptor runs out inside multiprocessing's receive
and the error is "received 0 items of ancdata" (here, torch 2.13.0+cpu). Expected cause dataloader_fd_limit.
With `--sharing file_system` the same run completes under the same limit.
"""
import argparse

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

FIELDS = 16  # tensors per sample: each becomes one shared storage, so one descriptor, per batch
STEPS = 200


class ManyFields(Dataset):
    """A sample of many small tensors (as a dict of features would be)."""

    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> list[torch.Tensor]:
        return [torch.full((4,), float(i + k)) for k in range(FIELDS)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4, help="DataLoader worker processes per rank")
    parser.add_argument("--sharing", choices=sorted(torch.multiprocessing.get_all_sharing_strategies()),
                        help="set this sharing strategy first (file_system is the entry's fix)")
    args = parser.parse_args()
    if args.sharing:
        torch.multiprocessing.set_sharing_strategy(args.sharing)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    loader = DataLoader(ManyFields(), batch_size=8, num_workers=args.workers)
    seen = []  # keeping batches alive keeps their descriptors open
    total = torch.zeros(1)
    for step, batch in enumerate(loader):
        seen.append(batch)
        total += sum(t.sum() for t in batch)
        if step == STEPS:
            break
    dist.all_reduce(total)
    print(f"DISTDOCTOR_OK rank={rank} checksum={total.item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
