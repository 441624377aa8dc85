"""A "drop into a console when the loss goes bad" aid: when a step's loss is not finite the script opens an
interactive Python console (`code.interact`) to inspect the step's variables. Rank 0's shard holds a sample that
makes the loss inf at its third step: rank 0 waits at the console's `>>>` prompt reading its standard input,
which nobody types into, while rank 1 waits in that step's all_reduce. The bad sample comes from the data, not
from a rank test. 2 ranks, stdin open (a terminal nobody types in).
Expected: odd rank 0, cause debugger_on_one_rank (an interactive inspection stop, like pdb), location: the
`code.interact(...)` line.
"""
import code
import math
from datetime import timedelta

import torch
import torch.distributed as dist

SAMPLES = [1.0, 2.0, 3.0, 4.0, 0.0, 6.0, 7.0, 8.0]  # 1/x of the sample at index 4 is inf


def step_loss(x: float) -> float:
    return 1.0 / x if x else math.inf


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    for step, x in enumerate(SAMPLES[rank::world]):
        loss = step_loss(x)
        if not math.isfinite(loss):
            code.interact(banner=f"step {step}: loss {loss}; inspect and Ctrl-D to go on", local=locals())
        total = torch.tensor([loss if math.isfinite(loss) else 0.0])
        dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
