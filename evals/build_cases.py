#!/usr/bin/env python3
"""Assemble evals/cases.jsonl from tests/data/logs (real logs + meta) and evals/cases_words.yaml.

    python evals/build_cases.py            # write evals/cases.jsonl, print coverage per cause
    python evals/build_cases.py --check    # exit 1 when cases.jsonl is stale or coverage is short
Exit: 0 ok, 1 stale/short coverage (with --check), 2 bad input.
"""
import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.evals import build  # noqa: E402
from distdoctor.evals.cases import CaseError  # noqa: E402
from distdoctor.knowledge import KnowledgeError, load_taxonomy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logs", default=str(build.LOGS), help="corpus directory (default tests/data/logs)")
    ap.add_argument("--words", default=str(build.WORDS), help="hand-written cases (default evals/cases_words.yaml)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "cases.jsonl"), help="output JSONL")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if --out is stale or coverage short")
    args = ap.parse_args()
    try:
        taxonomy = load_taxonomy()
    except (KnowledgeError, OSError) as exc:
        print(f"build_cases: error: {exc}", file=sys.stderr)
        return 2
    try:
        cases = build.build(Path(args.logs), Path(args.words), taxonomy)
    except (CaseError, OSError) as exc:
        print(f"build_cases: error: {exc}", file=sys.stderr)
        return 2
    text = build.to_jsonl(cases)
    per_cause = Counter(c.expected_cause for c in cases)
    origins = Counter(c.origin for c in cases)
    print(f"{len(cases)} cases; by origin: " + ", ".join(f"{k} {v}" for k, v in sorted(origins.items())),
          file=sys.stderr)
    for cause in taxonomy:
        print(f"  {cause:<28} {per_cause.get(cause, 0)}", file=sys.stderr)
    from distdoctor.corpus import load_corpus

    problems = build.coverage(cases, taxonomy, [c.cause for c in load_corpus(causes=set(taxonomy))])
    for p in problems:
        print(f"build_cases: coverage: {p}", file=sys.stderr)
    out = Path(args.out)
    if args.check:
        stale = not out.is_file() or out.read_text(encoding="utf-8") != text
        if stale:
            print(f"build_cases: {out} is stale: run python evals/build_cases.py", file=sys.stderr)
        return 1 if stale or problems or len(cases) < 80 else 0
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    print(f"wrote {out}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
