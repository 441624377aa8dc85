#!/usr/bin/env python3
"""Benchmark: distdoctor's patch engine (dry run) vs TorchFix (--select ALL) vs grep of the prefilter strings.

All three run on the same tree, one after the other, with the same number of jobs, in this process's
environment. TorchFix is installed on demand with `pip install --target bench/out/torchfix torchfix`
(never into the project's environment). The full torch package takes TorchFix many minutes: use
--subset distributed (a folder inside the installed torch package, or any path) to bench a part.

    python bench/bench_patch.py --subset distributed -j 1
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.patching.engine import iter_python_files, prefilter_strings  # noqa: E402
from distdoctor import paths  # noqa: E402
from distdoctor.paths import ROOT  # noqa: E402

OUT = ROOT / "bench" / "out"


def torch_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        raise SystemExit("bench_patch.py: error: torch is not installed in this environment")
    return Path(spec.origin).parent


def ensure_torchfix(target: Path) -> bool:
    if (target / "torchfix").is_dir():
        return True
    print(f"[bench] installing TorchFix into {target} (pip --target, not the project env)", file=sys.stderr)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                           "torchfix"], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"[bench] TorchFix could not be installed: {proc.stderr.strip()[-500:]}", file=sys.stderr)
        return False
    return True


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the command: user + system, worker processes included, exit code, stdout). CPU time
    is what a shared, loaded machine does not inflate: the ratio is reported for both."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.returncode, proc.stdout


def bench_tree(subset: str | None, prog: str) -> Path:
    """The tree to bench: the installed torch package, or --subset (a folder of it, or any path); exits 2
    with one line when it is not a directory."""
    base = torch_dir()
    tree = base if not subset else (Path(subset) if Path(subset).is_absolute() else base / subset)
    if not tree.is_dir():
        print(f"{prog}: error: {tree} is not a directory", file=sys.stderr)
        raise SystemExit(2)
    return tree


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subset", metavar="DIR", help="bench this folder of the torch package (or this path) only")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="jobs for every tool (default 1)")
    ap.add_argument("--only", metavar="IDS", help="bench only these patch ids (comma-separated), e.g. one cause's set")
    ap.add_argument("--no-torchfix", action="store_true", help="skip TorchFix")
    ap.add_argument("--save-report", type=Path, metavar="FILE", help="write the dry run's --json report here")
    ap.add_argument("--torchfix-target", type=Path, default=OUT / "torchfix", help="where TorchFix is installed")
    args = ap.parse_args()

    tree = bench_tree(args.subset, "bench_patch.py")
    files = sum(1 for _, err in iter_python_files(str(tree)) if err is None)
    patches = paths.patch_registry()

    chosen = [patches.get(i) for i in args.only.split(",")] if args.only else patches.all_patches()
    needles = prefilter_strings(chosen)
    results_only = ["--only", args.only] if args.only else []
    print(f"tree: {tree} ({files} .py files){' [subset]' if args.subset else ''}; jobs: {args.jobs}; "
          f"patches: {', '.join(m.PATCH.id for m in chosen)}")

    results: dict[str, float | int | str | None] = {"tree": str(tree), "files": files, "jobs": args.jobs,
                                                     "patches": [m.PATCH.id for m in chosen]}
    ours, ours_cpu, rc, out = timed([sys.executable, str(ROOT / "scripts" / "patch_backend.py"), str(tree),
                                     "--dry-run", "--include-tests", "--json", "--quiet", "-j", str(args.jobs), *results_only])
    doc = json.loads(out) if out.strip().startswith("{") else {}
    if args.save_report:
        args.save_report.write_text(out)  # the dry run's own report (diffs, changes): to compare engines
    results.update(distdoctor_s=round(ours, 2), distdoctor_cpu_s=round(ours_cpu, 2), distdoctor_exit=rc,
                   distdoctor_changed=doc.get("changed"))
    print(f"distdoctor dry run : {ours:8.2f} s  (CPU {ours_cpu:.2f} s; exit {rc}, {doc.get('changed')} file(s) "
          "would change)")

    pattern = "|".join(re.escape(n) for n in needles) if needles else "."
    grep, _, _, gout = timed(["grep", "-rlE", "--include=*.py", pattern, str(tree)])
    results.update(grep_s=round(grep, 3), grep_files=len(gout.splitlines()))
    print(f"grep -rlE prefilter: {grep:8.2f} s  ({len(gout.splitlines())} files match)")

    # The part of the dry run that does grep's job (walk, read, substring prefilter), in this process,
    # and the fixed cost of starting the CLI at all (interpreter, libcst, patch registry: `--list`).
    start = time.perf_counter()
    hits = 0
    for path, err in iter_python_files(str(tree)):
        if err is None:
            with open(path, "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
            hits += any(n in text for n in needles) if needles else 1
    stage = time.perf_counter() - start
    floor, _, _, _ = timed([sys.executable, str(ROOT / "scripts" / "patch_backend.py"), "--list"])
    results.update(prefilter_stage_s=round(stage, 3), prefilter_stage_files=hits, cli_start_s=round(floor, 3))
    print(f"prefilter stage    : {stage:8.2f} s  ({hits} files pass; walk + read + substring test, in process)")
    print(f"CLI start-up floor : {floor:8.2f} s  (patch_backend.py --list: interpreter, libcst, patches)")

    tfx = None
    if not args.no_torchfix and ensure_torchfix(args.torchfix_target):
        tfx, tfx_cpu, rc, _ = timed([sys.executable, "-m", "torchfix", "--select", "ALL", "-j", str(args.jobs), str(tree)],
                           env={"PYTHONPATH": str(args.torchfix_target)})
        results.update(torchfix_s=round(tfx, 2), torchfix_cpu_s=round(tfx_cpu, 2), torchfix_exit=rc)
        print(f"TorchFix --select ALL: {tfx:8.2f} s  (CPU {tfx_cpu:.2f} s; exit {rc})")

    if tfx:
        results["torchfix_over_distdoctor"] = round(tfx / ours, 1)
        results["torchfix_over_distdoctor_cpu"] = round(tfx_cpu / ours_cpu, 1) if ours_cpu else None
        print(f"TorchFix / distdoctor = {tfx / ours:.1f}x wall, {tfx_cpu / max(ours_cpu, 1e-9):.1f}x CPU   "
              "(target >= 20x)")
    if grep > 0:
        results["distdoctor_over_grep"] = round(ours / grep, 1)
        results["prefilter_stage_over_grep"] = round(stage / grep, 1)
        print(f"distdoctor / grep     = {ours / grep:.1f}x   (target <= 5x; the CLI's start-up alone is "
              f"{floor / grep:.1f}x)")
        print(f"prefilter stage / grep = {stage / grep:.1f}x")
    OUT.mkdir(parents=True, exist_ok=True)
    name = "bench_patch" + ("_" + args.only.replace(",", "_") if args.only else "") + ".json"
    (OUT / name).write_text(json.dumps(results, indent=2) + "\n")
    print(f"[bench] results in {OUT / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
