"""Every rank all_reduces its label histogram at the same line, but torch.bincount sizes it by the
largest label the rank saw: rank 0 sends 2 counts, ranks 1 and 2 one. gloo waits forever on all three.
Stacks show every rank at the same line; the Flight Recorder shows the sizes differ. Run with 3 ranks.

distdoctor.tracer's watchdog writes each rank's Flight Recorder trace after 3 s without progress to
$TORCH_FR_DUMP_TEMP_FILE<rank> (the file NCCL's TORCH_NCCL_DUMP_ON_TIMEOUT writes).
Expected: odd rank 0, cause collective_shape_mismatch, location: the `dist.all_reduce(counts)` line.
"""
import os
import sys
from datetime import timedelta
from pathlib import Path

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")  # before the process group exists
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import distdoctor.tracer as T  # noqa: E402


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    T.watchdog(3, flight_recorder=True)
    model = torch.nn.Linear(8, 1)
    for p in model.parameters():
        dist.all_reduce(p.data)
    T.checkpoint("weights synced")
    labels = torch.tensor([0, 1, 1] if rank == 0 else [0, 0])
    counts = torch.bincount(labels)
    dist.all_reduce(counts)
    T.checkpoint("label histogram synced")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
