"""`scripts/hang.py`: name the rank, the line and the cause of a job that hangs silently.

  hang.py [--pid PID]                # live ranks on this host (under a torchrun agent / srun step / rank)
  hang.py --collect > host.json      # this host's snapshot as JSON (run it on every node)
  hang.py --merge a.json b.json      # one report from per-host snapshots
  hang.py --fr DIR                   # Flight Recorder traces (<prefix><rank>, ours or NCCL's dumps)
  srun --overlap --jobid J --ntasks-per-node=1 --output=hang-%N.json python scripts/hang.py --collect
  hang.py --merge hang-*.json        # Slurm: one snapshot per node (srun names the files), then one report

--json prints {ranks, odd_ranks, causes, location, ...}. Exit 0 a verdict, 1 no divergence found, 2 input
error. Nothing is signalled: py-spy reads each rank from outside for a moment (needs ptrace rights).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
from pathlib import Path

from distdoctor.hang import flight_recorder as fr
from distdoctor.hang.live import CollectError, collect
from distdoctor.hang.model import HostSnapshot, merge


def _load(paths: list[str]) -> list[HostSnapshot]:
    """Per-host snapshots from files (one JSON object, or one per line as srun's merged output gives)."""
    out = []
    for p in paths:
        try:
            text = sys.stdin.read() if p == "-" else Path(p).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CollectError(f"{p}: cannot read: {exc}") from None
        try:
            docs = [json.loads(text)] if text.lstrip().startswith("{") and _one_doc(text) else \
                [json.loads(line) for line in text.splitlines() if line.strip()]
            out += [HostSnapshot.from_json(d) for d in docs]
        except (ValueError, TypeError, KeyError) as exc:
            raise CollectError(f"{p}: not a hang.py --collect snapshot: {exc}") from None
    return out


def _one_doc(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def checker_findings(snap: HostSnapshot, verdict) -> list[dict]:
    """The static checker's findings on the lines that sent the odd ranks where they are (their call paths and
    the location), so the report names the rule that would have caught it before launch."""
    from distdoctor.check.link import findings_near

    places = [(f.file, f.line) for r in snap.ranks if r.rank in verdict.odd_ranks for f in r.path]
    if verdict.location:
        places.append((verdict.location["file"], verdict.location["line"]))
    return findings_near(places, span=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hang.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, help="a torchrun agent, srun step or rank pid (default: every rank here)")
    ap.add_argument("--collect", action="store_true", help="print this host's snapshot as one JSON line")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="analyse per-host snapshots (files, or - for stdin)")
    ap.add_argument("--fr", metavar="DIR", help="Flight Recorder traces, one file per rank named <prefix><rank>")
    ap.add_argument("--fr-prefix", help="only trace files whose name starts with this")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per py-spy dump (default 10)")
    ap.add_argument("--py-spy", help="the py-spy to use (default: on PATH or beside this Python)")
    ap.add_argument("--host", help="the host name to record (default: this host's name)")
    ap.add_argument("--nonblocking", action="store_true", help="do not pause the ranks while py-spy reads them")
    ap.add_argument("--slurm-job", help="only ranks of this Slurm job (default inside an srun step: its job)")
    args = ap.parse_args(argv)
    if not args.collect:  # load the analysis (libcst) while py-spy dumps the ranks
        warm = threading.Thread(target=importlib.import_module, args=("distdoctor.hang.report",), daemon=True)
        warm.start()
    try:
        if args.merge:
            snap = merge(_load(args.merge))
        elif args.fr and args.pid is None and not args.collect:
            snap = HostSnapshot("-")
        else:
            job = args.slurm_job or (os.environ.get("SLURM_JOB_ID") if os.environ.get("SLURM_STEP_ID")
                                      and args.pid is None else None)
            snap = collect(args.pid, args.py_spy, args.timeout, args.host, job, args.nonblocking)
        if args.fr:
            snap.flight_recorder.update(fr.read_dir(Path(args.fr), args.fr_prefix))
    except (CollectError, fr.TraceError) as exc:
        print(f"hang.py: {exc}", file=sys.stderr)
        return 2
    if args.collect:
        print(json.dumps(snap.to_json()))
        return 0
    from distdoctor.hang.align import analyse
    from distdoctor.hang.report import render, to_json

    verdict = analyse(snap)
    if verdict.causes:
        verdict.checker = checker_findings(snap, verdict)
    print(json.dumps(to_json(snap, verdict), indent=2) if args.json else render(snap, verdict))
    return 0 if verdict.causes else 1
