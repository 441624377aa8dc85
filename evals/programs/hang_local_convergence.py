"""An iterative solve (Newton's square root of a per-rank target) runs `while not converged:` with an all_reduce of
the step in every iteration (to log the global residual), but `converged` is computed from the rank's own step
against a float tolerance, not from the reduced one. The targets come from each rank's shard of the data; ranks 0
and 1 converge in the same number of iterations, rank 2 (a far larger target) needs more: its extra all_reduce
waits for ranks that left the loop and wait in the barrier. 3 ranks.
Expected: odd rank 2, cause rank_conditional_collective (the loop's collective runs on some ranks only), location:
the `converged = abs(new - value) < TOL` line (the per-rank test the loop's condition reads).
"""
from datetime import timedelta

import torch
import torch.distributed as dist

DATA = [3.0, 4.0, 9.0e5, 3.0, 4.0, 1.0e5, 4.0, 4.0, 5.0e3]
TOL = 1e-9


def solve(target: float) -> tuple[float, int]:
    """sqrt(target) by Newton's iteration from 1.0; the global residual is all_reduced for the log."""
    value, iters = 1.0, 0
    converged = False
    while not converged:
        new = 0.5 * (value + target / value)
        residual = torch.tensor([abs(new - value)])
        dist.all_reduce(residual)
        converged = abs(new - value) < TOL
        value, iters = new, iters + 1
    return value, iters


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    rank, world = dist.get_rank(), dist.get_world_size()
    root, iters = solve(sum(DATA[rank::world]))
    dist.barrier()
    print(f"rank {rank}: root {root:.6f} after {iters} iterations", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
