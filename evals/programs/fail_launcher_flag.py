"""A training script with its own --run (experiment name) and --device-type flags, launched by torchrun.

Launched as `torchrun ... fail_launcher_flag.py --device-type cpu --run test` (no `--`), torchrun's
parser may take a script flag for one of its own: expected cause launcher_args.
"""
import argparse
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device-type", default="cuda")
    parser.add_argument("--run", default="dummy", help="experiment name")
    args = parser.parse_args()
    print(f"rank {os.environ.get('RANK')} argv={sys.argv[1:]} run={args.run} device={args.device_type}",
          flush=True)
    if args.run == "dummy":
        print(f"rank {os.environ.get('RANK')}: warning: no --run given, logging to 'dummy'", flush=True)


if __name__ == "__main__":
    main()
