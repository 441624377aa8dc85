"""Command line of the patch engine (scripts/patch_backend.py is a thin wrapper around main())."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Sequence

from distdoctor import paths

if TYPE_CHECKING:  # the engine (libcst) is imported only when there is work: --help needs no third-party module
    from distdoctor.patching.engine import FileOutcome

EXIT_OK, EXIT_CHANGES, EXIT_USAGE = 0, 1, 2

DESCRIPTION = """Rewrite distributed PyTorch code so that it runs where it failed: libcst patches from patches/,
applied to every *.py file under the given repositories or files. Prints a unified diff and one line per
change (`path:line patch what`). Exit codes: 0 done, 1 with --check when something would change,
2 usage error or files that could not be processed (each reported with path and reason)."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="patch_backend.py", description=DESCRIPTION)
    p.add_argument("paths", nargs="*", metavar="REPO_OR_FILE", help="repositories (directories) or .py files")
    p.add_argument("--dry-run", action="store_true", help="print the diff and the changes, write nothing")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when anything would change")
    p.add_argument("--only", metavar="IDS", help="comma-separated patch ids to apply (default: all)")
    p.add_argument("--skip", metavar="IDS", help="comma-separated patch ids not to apply")
    p.add_argument("--list", action="store_true", help="list the available patches and exit")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="worker processes (default 1)")
    p.add_argument("--env-prefix", metavar="P",
                   help="prefix of environment switches patches introduce (default: the repo's package name)")
    p.add_argument("--include-tests", action="store_true",
                   help="also patch tests/ and test/ folders, test_*.py, *_test.py and conftest.py found while "
                        "walking a directory (default: skipped; a file named on the command line is always patched)")
    p.add_argument("--quiet", action="store_true", help="no diff, no progress; report lines and errors only")
    return p


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _list(as_json: bool) -> int:
    patches = paths.patch_registry()

    rows = [{"id": mod.PATCH.id, "cause": mod.PATCH.cause, "title": mod.PATCH.title, "risk": mod.PATCH.risk,
             "env_var": mod.PATCH.env_var} for mod in patches.all_patches()]
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        width = max((len(r["id"]) for r in rows), default=2)
        for r in rows:
            env = f"  [env {r['env_var']}]" if r["env_var"] else ""
            print(f"{r['id']:<{width}}  {r['cause']:<22} {r['title']}{env}")
    return EXIT_OK


def _select(only: list[str], skip: list[str]) -> list[str]:
    patches = paths.patch_registry()

    known = patches.ids()
    unknown = [i for i in only + skip if i not in known]
    if unknown:
        raise ValueError(f"unknown patch id(s): {', '.join(unknown)} (known: {', '.join(known)})")
    chosen = only or known
    return [i for i in chosen if i not in skip]


def _report(outcomes: list[FileOutcome], as_json: bool, quiet: bool, write: bool,
            skipped_tests: list[str]) -> None:
    changed = [o for o in outcomes if o.changes and not o.error]
    errors = [o for o in outcomes if o.error]
    if as_json:
        doc = {"files": [{"path": o.path, "changes": [{"line": c.line, "patch": c.patch, "what": c.what}
                                                      for c in o.changes], "diff": o.diff} for o in changed],
               "errors": [{"path": o.path, "reason": o.error} for o in errors],
               "changed": len(changed), "skipped_tests": skipped_tests}
        print(json.dumps(doc, indent=2))
        return
    for o in changed:
        if not quiet:
            sys.stdout.write(o.diff)
        for c in o.changes:
            print(f"{o.path}:{c.line} {c.patch} {c.what}")
    sys.stdout.flush()
    for o in errors:
        print(f"{o.path}: error: {o.error}", file=sys.stderr)
    if not quiet:
        n = sum(len(o.changes) for o in changed)
        verb = "patched" if write else "would patch"
        print(f"[patch] {verb} {len(changed)} file(s), {n} change(s); {len(errors)} error(s)", file=sys.stderr)
        if skipped_tests:
            print(f"[patch] skipped {len(skipped_tests)} test file(s) (--include-tests to patch them too)",
                  file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.list:
            return _list(args.json)
        if not args.paths:
            parser.print_usage(sys.stderr)
            print("patch_backend.py: error: give at least one REPO_OR_FILE (or --list)", file=sys.stderr)
            return EXIT_USAGE
        if args.jobs < 1:
            print("patch_backend.py: error: -j must be at least 1", file=sys.stderr)
            return EXIT_USAGE
        if args.env_prefix is not None and not args.env_prefix.replace("_", "").isalnum():
            print(f"patch_backend.py: error: --env-prefix {args.env_prefix!r} must be letters, digits and _",
                  file=sys.stderr)
            return EXIT_USAGE
        selected = _select(_split(args.only), _split(args.skip))
    except (ValueError, ImportError) as exc:
        print(f"patch_backend.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from distdoctor.patching.engine import _stderr_progress, patch_paths

    write = not (args.dry_run or args.check)
    progress = None if (args.quiet or args.json) else _stderr_progress
    skipped_tests: list[str] = []
    if not selected:
        outcomes: list[FileOutcome] = []
    else:
        outcomes = patch_paths([os.fspath(p) for p in args.paths], selected, write=write, jobs=args.jobs,
                               env_prefix=args.env_prefix, progress=progress,
                               include_tests=args.include_tests, skipped_tests=skipped_tests)
    _report(outcomes, args.json, args.quiet, write, skipped_tests)
    if any(o.error for o in outcomes):
        return EXIT_USAGE
    if args.check and any(o.changes for o in outcomes):
        return EXIT_CHANGES
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
