"""Each rank all_gathers its evaluation summary with all_gather_object inside a try/except that logs failures
and goes on; rank 1's summary holds a lambda, which cannot be pickled, so rank 1 raises before it joins the
gather, logs it and goes on to the barrier, while ranks 0 and 2 wait in all_gather_object. Run with 3 ranks.
Expected: odd rank 1, cause rank_conditional_collective, location: the `except Exception as exc:` line.
The shape, in a public thread: https://github.com/NVIDIA/TensorRT-LLM/pull/7507 """
from datetime import timedelta

import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank = dist.get_rank()
    summary = {"rank": rank, "metric": (lambda x: x) if rank == 1 else 0.5}
    gathered = [None] * dist.get_world_size()
    try:
        dist.all_gather_object(gathered, summary)
    except Exception as exc:
        print(f"rank {rank}: could not gather the summary: {exc}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
