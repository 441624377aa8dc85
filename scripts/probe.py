#!/usr/bin/env python3
"""Launch probe: start it with the job's own launcher; every rank checks in, rank 0 prints a table and a verdict.

  torchrun --standalone --nproc_per_node=2 scripts/probe.py [--json] [--expect-world-size N]
  srun --ntasks=2 --kill-on-bad-exit=1 bash -c 'RANK=$SLURM_PROCID ... python scripts/probe.py'

Exit codes: 0 launch looks right, 1 a problem was found (named in the verdict), 2 usage error.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.probe import run_probe  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="rank 0 prints the result as JSON instead of a table")
    ap.add_argument("--expect-world-size", type=int, metavar="N",
                    help="number of ranks the job should have; WORLD_SIZE 1 or another count is reported")
    ap.add_argument("--timeout", type=float, default=30.0, metavar="S",
                    help="seconds to wait for all ranks to join and for each collective (default 30)")
    ap.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                    help="auto: nccl when CUDA GPUs are visible, else gloo")
    args = ap.parse_args(argv)
    if args.expect_world_size is not None and args.expect_world_size < 1:
        ap.error("--expect-world-size must be at least 1")
    if args.timeout <= 0:
        ap.error("--timeout must be positive")
    return run_probe(args.backend, args.timeout, args.expect_world_size, args.json)


if __name__ == "__main__":
    sys.exit(main())
