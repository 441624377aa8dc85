"""Every rank all_gathers its evaluation results with all_gather_object; rank 1's results hold an object whose
pickling takes minutes (here: a __getstate__ that walks a huge structure), so rank 1 is inside the collective's
serialisation, in the user's code, while rank 0 waits in the gather. Run with 2 ranks.
Expected: odd rank 1, cause collective_timeout (a straggler in its own code, called from inside the collective),
location: the `while total < self.size:  # serialise every record` line in __getstate__.
The shape, in a public thread: https://github.com/pytorch/pytorch/pull/150815 """
from datetime import timedelta

import torch.distributed as dist


class Results:
    def __init__(self, size: int) -> None:
        self.size = size

    def __getstate__(self) -> dict:
        total = 0
        while total < self.size:  # serialise every record
            total += 1
        return {"size": self.size}


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    mine = Results(10 ** 12 if rank == 1 else 1)
    gathered = [None, None]
    dist.all_gather_object(gathered, mine)
    print(f"rank {rank}: gathered {len(gathered)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
