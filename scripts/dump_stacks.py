#!/usr/bin/env python3
"""Dump the Python stacks of every rank process of distributed jobs on this host (run it on each node).

  python scripts/dump_stacks.py              # every rank found on this host
  python scripts/dump_stacks.py --pid 1234   # only the job under this torchrun agent / srun step / rank
  python scripts/dump_stacks.py --list       # only list the rank processes

Uses `py-spy dump` when installed (`pip install py-spy`); without it, sends SIGUSR1 to ranks that catch
it (distdoctor.tracer registers faulthandler for SIGUSR1) so they print their stacks into their own log.
Exit codes: 0 every rank dumped, 1 some not dumped, 3 no rank process found, 2 usage error.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.stacks import INSTALL_HINT, dump, find_py_spy, find_rank_processes  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, help="a torchrun agent, srun/slurmstepd or rank pid: only it and its children")
    ap.add_argument("--list", action="store_true", help="list rank processes, dump nothing")
    ap.add_argument("--no-py-spy", action="store_true", help="do not use py-spy even if installed (SIGUSR1 only)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per py-spy dump (default 30)")
    args = ap.parse_args(argv)
    try:
        procs = find_rank_processes(args.pid)
    except LookupError as exc:
        print(f"dump_stacks: {exc}", file=sys.stderr)
        return 2
    if not procs:
        print("dump_stacks: no rank process found on this host (looked for python processes with RANK in "
              "/proc/<pid>/environ or a torchrun parent)", file=sys.stderr)
        return 3
    py_spy = None if args.no_py_spy else find_py_spy()
    if not py_spy and not args.list:
        print(f"dump_stacks: {INSTALL_HINT}; falling back to SIGUSR1 where a rank catches it", file=sys.stderr)
    failed = 0
    for i, proc in enumerate(procs, 1):
        print(f"=== {proc.label()} :: {proc.cmdline[:160]}")
        if args.list:
            continue
        print(f"dump_stacks: {i}/{len(procs)} pid {proc.pid}", file=sys.stderr)
        done, text = dump(proc, py_spy, args.timeout)
        print(text)
        failed += not done
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
