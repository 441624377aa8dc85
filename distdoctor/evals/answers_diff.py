"""Record the built-in diagnosis's answers on the TRAIN split and evals/cases.jsonl, and compare two records.

A change that must keep every top cause (its id, level, verdict, fix and patch) while it changes what follows is
checked by recording before and after and comparing: the top-1 columns must be identical; top-3 is counted
before and after. Held-out cases are never loaded (corpus.train_cases); a train case is diagnosed with its own
log left out of retrieval, as the corpus evals do.

    python -m distdoctor.evals.answers_diff record OUT.json [--corpus DIR] [--cases FILE]
    python -m distdoctor.evals.answers_diff compare BEFORE.json AFTER.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from distdoctor import paths
from distdoctor.corpus import CORPUS

KEPT = ("top1", "verdict", "level", "fix", "patch")  # what a change to the ranks after the top must not touch


def _row(set_: str, case_id: str, expected: str, text: str, result: dict) -> dict:
    causes = result.get("causes") or []
    return {"set": set_, "id": case_id, "expected": expected, "text": text,
            "top1": causes[0]["id"] if causes else None, "verdict": result.get("verdict"),
            "level": causes[0].get("level") if causes else None, "fix": result.get("fix"),
            "patch": result.get("patch"), "ranked": [c["id"] for c in causes],
            "levels": [c.get("level") for c in causes]}


def record(corpus: Path = CORPUS, cases_file: Path | None = None) -> list[dict]:
    """One row per train case and per case of the case file: the answer's top and its ranked ids."""
    from distdoctor.corpus import train_cases
    from distdoctor.diagnose import diagnose_text
    from distdoctor.diagnose.retrieval import excluding, use_corpus
    from distdoctor.evals.cases import load_cases
    from distdoctor.evals.responders import BuiltinResponder

    rows = []
    use_corpus(corpus)
    try:
        for c in train_cases(str(corpus)):
            with excluding({f"corpus:{c.id}"}):
                r = diagnose_text(c.log, context=c.context or None, name=f"{c.id}.log")
            rows.append(_row("train", c.id, c.cause, c.text, r))
    finally:
        use_corpus(None)
    builtin = BuiltinResponder()
    for c in load_cases(cases_file or paths.ROOT / "evals" / "cases.jsonl"):
        r = builtin.diagnose(c.log, c.context, dict(c.files))
        rows.append(_row("cases", c.id, c.expected_cause, "short_log" if c.log.strip() else "words", r))
    return rows


def _top3(rows: list[dict]) -> str:
    return f"{sum(r['expected'] in r['ranked'][:3] for r in rows)}/{len(rows)}"


def compare(before: list[dict], after: list[dict]) -> tuple[list[str], list[str]]:
    """(differences in what must be kept, lines of top-1 / top-3 counts per set and text)."""
    old = {(r["set"], r["id"]): r for r in before}
    new = {(r["set"], r["id"]): r for r in after}
    diffs = [f"{k[0]} {k[1]}: only in {'before' if k in old else 'after'}" for k in sorted(set(old) ^ set(new))]
    for k in sorted(set(old) & set(new)):
        diffs += [f"{k[0]} {k[1]}: {f} {old[k][f]!r} -> {new[k][f]!r}" for f in KEPT if old[k][f] != new[k][f]]
    lines = []
    for set_, text in sorted({(r["set"], r["text"]) for r in after}):
        b = [r for r in before if (r["set"], r["text"]) == (set_, text)]
        a = [r for r in after if (r["set"], r["text"]) == (set_, text)]
        top1 = sum(r["expected"] == r["top1"] for r in a)
        lines.append(f"{set_:<6} {text:<9} n={len(a):<4} top-1 {top1}/{len(a)}  top-3 {_top3(b)} -> {_top3(a)}")
    return diffs, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="answers_diff", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="diagnose the train split and the case file, write the answers as JSON")
    rec.add_argument("out", type=Path)
    rec.add_argument("--corpus", type=Path, default=CORPUS)
    rec.add_argument("--cases", type=Path, default=None)
    cmp_ = sub.add_parser("compare", help="compare two records: exit 1 when a top answer changed")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "record":
        args.out.write_text(json.dumps(record(args.corpus, args.cases), indent=1) + "\n", encoding="utf-8")
        return 0
    try:
        before, after = (json.loads(p.read_text(encoding="utf-8")) for p in (args.before, args.after))
    except (OSError, ValueError) as exc:
        print(f"answers_diff: {exc}", file=sys.stderr)
        return 2
    diffs, lines = compare(before, after)
    print("\n".join(lines))
    print(f"{len(diffs)} top answer(s) changed" + (":" if diffs else ""))
    print("\n".join(diffs[:50]))
    return 1 if diffs else 0


if __name__ == "__main__":
    from distdoctor.cli import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main))
