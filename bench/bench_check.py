#!/usr/bin/env python3
"""Benchmark: distdoctor's static checker vs TorchFix (--select ALL) on the same tree, in the same run.

Both run one after the other with the same number of jobs. TorchFix is installed on demand into
bench/out/torchfix (never the project's environment; see bench_patch.py). TorchFix over all of torch takes
~25 min on an idle machine: --subset distributed (a folder of the installed torch package, or any path)
benches a part.

    python bench/bench_check.py --subset distributed -j 1
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_patch import OUT, bench_tree, ensure_torchfix, timed  # noqa: E402
from distdoctor.patching.engine import iter_python_files  # noqa: E402
from distdoctor.paths import ROOT  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subset", metavar="DIR", help="bench this folder of the torch package (or this path) only")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="jobs for both tools (default 1)")
    ap.add_argument("--no-torchfix", action="store_true", help="time the checker only")
    ap.add_argument("--torchfix-target", type=Path, default=OUT / "torchfix", help="where TorchFix is installed")
    args = ap.parse_args()

    tree = bench_tree(args.subset, "bench_check.py")
    files = sum(1 for _, err in iter_python_files(str(tree)) if err is None)
    print(f"tree: {tree} ({files} .py files){' [subset]' if args.subset else ''}; jobs: {args.jobs}", flush=True)
    results: dict = {"tree": str(tree), "files": files, "jobs": args.jobs}

    ours, ours_cpu, rc, out = timed([sys.executable, str(ROOT / "scripts" / "check_repo.py"), str(tree),
                                     "--include-tests", "--format", "json", "-j", str(args.jobs)])
    findings = json.loads(out) if out.strip().startswith("[") else None
    n = len(findings) if findings is not None else None
    results.update(distdoctor_s=round(ours, 2), distdoctor_cpu_s=round(ours_cpu, 2), distdoctor_exit=rc,
                   distdoctor_findings=n)
    print(f"distdoctor check     : {ours:8.2f} s wall {ours_cpu:8.2f} s CPU  (exit {rc}, {n} finding(s))", flush=True)

    if not args.no_torchfix and ensure_torchfix(args.torchfix_target):
        tfx, tfx_cpu, rc, _ = timed([sys.executable, "-m", "torchfix", "--select", "ALL", "-j", str(args.jobs),
                                     str(tree)], env={"PYTHONPATH": str(args.torchfix_target)})
        results.update(torchfix_s=round(tfx, 2), torchfix_cpu_s=round(tfx_cpu, 2), torchfix_exit=rc,
                       torchfix_over_distdoctor=round(tfx / ours, 1),
                       torchfix_over_distdoctor_cpu=round(tfx_cpu / max(ours_cpu, 1e-9), 1))
        print(f"TorchFix --select ALL: {tfx:8.2f} s wall {tfx_cpu:8.2f} s CPU  (exit {rc})")
        print(f"TorchFix / distdoctor = {tfx / ours:.1f}x wall, {tfx_cpu / max(ours_cpu, 1e-9):.1f}x CPU   "
              f"(target >= 10x)")
        # the planted hazards: what each tool reports on the programs that misbehave for real
        planted = sorted(str(p) for p in (ROOT / "evals" / "programs").glob("check_*.py"))
        _, _, _, tout = timed([sys.executable, "-m", "torchfix", "--select", "ALL", *planted],
                              env={"PYTHONPATH": str(args.torchfix_target)})
        _, _, _, oout = timed([sys.executable, str(ROOT / "scripts" / "check_repo.py"), "--format", "json",
                               *planted])
        ours_planted = len(json.loads(oout)) if oout.strip().startswith("[") else None
        tfx_planted = sum(1 for line in tout.splitlines() if re.match(r".+:\d+:\d+", line))
        results.update(planted_programs=len(planted), planted_torchfix_findings=tfx_planted,
                       planted_distdoctor_findings=ours_planted)
        print(f"planted hazards ({len(planted)} programs): TorchFix {tfx_planted} finding(s), "
              f"distdoctor {ours_planted}")
    OUT.mkdir(parents=True, exist_ok=True)
    name = "bench_check" + (f"_{Path(args.subset).name}" if args.subset else "") + ".json"
    (OUT / name).write_text(json.dumps(results, indent=2) + "\n")
    print(f"[bench] results in {OUT / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
