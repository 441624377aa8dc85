"""Command line of the knowledge-base validator (scripts/validate_kb.py, `distdoctor validate`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from distdoctor import paths

DESCRIPTION = "Validate the knowledge base: references/*.md, profiles/*.md and SKILL.md."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="validate_kb.py", description=DESCRIPTION,
                                 epilog="Exit status: 0 when valid, 1 when problems were found, 2 on bad usage.")
    ap.add_argument("--root", type=Path, default=paths.ROOT, help="checkout to validate (default: this repository)")
    ap.add_argument("--taxonomy", type=Path, default=None,
                    help="cause taxonomy (default: $DISTDOCTOR_TAXONOMY or references/taxonomy.yaml)")
    ap.add_argument("--field-reports", type=Path, default=None,
                    help="folder of field reports quoted by entries (default: beside the taxonomy)")
    ap.add_argument("--json", action="store_true", help="print problems as a JSON list")
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        print(f"validate_kb: --root {args.root}: not a directory", file=sys.stderr)
        return 2
    if args.taxonomy is not None and not args.taxonomy.is_file():
        print(f"validate_kb: --taxonomy {args.taxonomy}: no such file", file=sys.stderr)
        return 2
    from distdoctor.validate import validate  # pyyaml, jsonschema: imported only now

    problems, notices = validate(args.root, args.taxonomy, args.field_reports)
    for n in dict.fromkeys(notices):
        print(f"notice: {n}", file=sys.stderr)
    if args.json:
        print(json.dumps([p.__dict__ for p in problems], indent=1))
    else:
        for p in problems:
            print(p)
    if problems:
        print(f"validate_kb: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("validate_kb: ok", file=sys.stderr)
    return 0
