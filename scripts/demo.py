#!/usr/bin/env python3
"""Demo: run the bundled broken DDP example on 2 CPU ranks (it fails), patch a copy, run it again (it works).

Works on a temporary copy of examples/broken_ddp; the example itself is never modified.
Exit 0 when the patched run finishes on every rank with equal checksums, 1 otherwise.
"""

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.patching.engine import patch_paths  # noqa: E402
from distdoctor.paths import ROOT  # noqa: E402
from distdoctor.runner import finished_despite_teardown_abort, finished_ranks, run_torchrun  # noqa: E402

EXAMPLE = ROOT / "examples" / "broken_ddp"
PATCHES = ["gloo_backend", "ddp_cpu_args", "cuda_requirements"]  # the patch for cause nccl_without_cuda


def say(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def first_error(output: str) -> str:
    lines = [ln for ln in output.splitlines() if re.match(r"^\w*(Error|Exception)\b", ln.strip())]
    return lines[0].strip() if lines else "(no error line)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", type=int, default=2, help="ranks to start (default 2)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per torchrun run (default 120)")
    ap.add_argument("--skip-broken-run", action="store_true", help="do not run the unpatched example first")
    args = ap.parse_args()
    if not (EXAMPLE / "train.py").is_file():
        print(f"demo.py: error: {EXAMPLE / 'train.py'} is missing", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="distdoctor-demo-") as tmp:
        work = Path(tmp) / "broken_ddp"
        shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
        script = work / "train.py"
        if not args.skip_broken_run:
            say(f"1. torchrun --nproc_per_node={args.nproc} train.py (unpatched)")
            before = run_torchrun(script, args.nproc, timeout=args.timeout, cwd=work)
            print(f"exit code {before.returncode}{' (timed out)' if before.timed_out else ''}: "
                  f"{first_error(before.output)}")
        say(f"2. python scripts/patch_backend.py --only {','.join(PATCHES)} <copy of examples/broken_ddp>")
        outcomes = patch_paths([str(work)], PATCHES, write=True)
        for outcome in outcomes:
            if outcome.error:
                print(f"{outcome.path}: error: {outcome.error}")
                return 1
            sys.stdout.write(outcome.diff.replace(str(work).lstrip("/") + "/", ""))
            for change in outcome.changes:
                print(f"train.py:{change.line} {change.patch} {change.what}")
        say(f"3. torchrun --nproc_per_node={args.nproc} train.py (patched)")
        after = run_torchrun(script, args.nproc, timeout=args.timeout, cwd=work)
        found = finished_ranks(after.output)
        # a rare gloo abort at process exit, after every rank finished, is teardown, not the fix failing
        teardown = finished_despite_teardown_abort(after)
        ok = (after.ok or teardown) and len(found) == args.nproc and len(set(found.values())) == 1
        for rank in sorted(found):
            print(f"DISTDOCTOR_OK rank={rank} checksum={found[rank]}")
        if ok:
            say(f"fixed: all {args.nproc} ranks finished on gloo with equal checksums")
            return 0
        print(after.output[-3000:])
        say(f"still failing: exit code {after.returncode}, {len(found)}/{args.nproc} ranks reported OK")
        return 1


if __name__ == "__main__":
    sys.exit(main())
