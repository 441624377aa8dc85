"""Command line of the checker (scripts/check_repo.py is a thin wrapper around main())."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from distdoctor.check import report

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """Find distributed PyTorch code that will hang, race or silently misbehave under torchrun, before
launch: collectives on some ranks only, missing set_epoch, every rank saving one file, devices by global rank,
... Each finding names a cause of references/taxonomy.yaml and its knowledge-base entry. Never imports the code.
Exit codes: 0 clean, 1 findings, 2 usage error or files that could not be read (each reported on one line).
Suppress with `# noqa: DD101` on the line, or `# distdoctor: noqa[: DD101]` anywhere in a file."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="check_repo.py", description=DESCRIPTION)
    p.add_argument("paths", nargs="*", metavar="PATH", help="repositories (directories) or .py files")
    p.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text")
    p.add_argument("--select", metavar="CODES", help="comma-separated rule codes or prefixes (default: all)")
    p.add_argument("--ignore", metavar="CODES", help="comma-separated rule codes or prefixes to leave out")
    p.add_argument("--list", action="store_true", help="list the rules and exit")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="worker processes (default 1)")
    p.add_argument("--include-tests", action="store_true",
                   help="also check tests/ folders and test_*.py files found while walking (default: skipped)")
    p.add_argument("--progress", action="store_true", help="progress on stderr (default: only on a terminal)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    return p


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _list() -> int:
    from distdoctor.check import rules

    for m in rules.all_rules():
        print(f"{m.RULE.code}  {m.RULE.severity:<7}  {m.RULE.cause:<28} {m.RULE.title}  [{report.link(m.RULE.cause)}]")
    return EXIT_CLEAN


def _progress(done: int, total: int) -> None:
    if done == total or done % 25 == 0:
        print(f"\r[check] {done}/{total} files", end="\n" if done == total else "", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    # the engine (libcst) is imported after parsing, so `--help` needs no third-party module
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        return _list()
    if args.jobs < 1:
        print("check_repo.py: error: -j must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    from distdoctor.check.engine import check_paths, select_rules

    try:
        rules = select_rules(_split(args.select), _split(args.ignore))
    except ValueError as exc:
        print(f"check_repo.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.paths:  # pre-commit passes no file names when none changed
        if args.format == "json":
            print("[]")
        return EXIT_CLEAN
    show = args.progress or (sys.stderr.isatty() and args.format == "text")
    result = check_paths([os.fspath(p) for p in args.paths], _split(args.select), _split(args.ignore),
                         jobs=args.jobs, include_tests=args.include_tests, progress=_progress if show else None)
    errors = [(p, r) for p, r in result.errors if not r.startswith("symbolic link")]
    for path, reason in result.errors:
        kind = "error" if (path, reason) in errors else "skipped"
        print(f"{path}: {kind}: {reason}", file=sys.stderr)
    out = {"text": lambda: report.text(result.findings), "json": lambda: report.as_json(result.findings),
           "github": lambda: report.github(result.findings),
           "sarif": lambda: report.sarif(result.findings, rules)}[args.format]()
    sys.stdout.write(out)
    sys.stdout.flush()
    if args.format == "text":
        n = len(result.findings)
        print(f"[check] {n} finding(s) in {result.files} file(s); {len(errors)} error(s)"
              + (f"; skipped {len(result.skipped_tests)} test file(s)" if result.skipped_tests else ""),
              file=sys.stderr)
    if errors:  # a symbolic link met while walking is skipped (never followed), not an input error
        return EXIT_USAGE
    return EXIT_FINDINGS if result.findings and not args.exit_zero else EXIT_CLEAN
