"""Cross-validation of the retrieval fallback on a corpus's TRAIN split only (held-out cases are never loaded).

The train cases are cut into K folds by a hash of their id (a hash of its own, not the split's). Each fold is
scored with its cases removed from the retrieval index, so a setting is judged on logs the index has not seen:
- `retrieval`: every train case's retrieval query (engine.retrieval_query: what the diagnosis compares with known
  failures) ranked against the knowledge base and the other folds' cases; top-1 / top-3 of the causes named;
- `diagnosis`: the whole diagnosis of each case with its fold left out of retrieval: top-1 / top-3 over all cases,
  and over the cases whose answer rests on retrieval (no signature or structure makes it confident), and over the
  confident ones (their top-1 is the confident answers' precision); `misses` lists the train cases with a wrong top-1;
- `shares` (--shares): how often a cause retrieval ranks second or lower is the case's cause, by its share of the
  best cause's votes (what engine.ALT_SIMILAR_MIN, the evidence an alternative after a confident cause needs,
  was chosen from).
With --grouped the folds are source repositories instead (leave one repository out: a case's own log and every
case from the same project, `huggingface-accelerate-12` -> `huggingface-accelerate`, are out of the index): a
neighbour from the same project (same launcher, same banners, often the same user) says more about a train case
than any neighbour could about a log nobody has seen.
With --drop-own-signatures a fold's diagnosis also goes without the signatures that match no train case outside
the fold (those written from its logs, as far as the corpus can tell): a signature nobody wrote for this log.

    python -m distdoctor.evals.retrieval_cv [--corpus DIR] [--folds K | --grouped] [--drop-own-signatures] [--json]
                                            [--shares] [--misses]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from distdoctor.corpus import CORPUS, CorpusCase, train_cases

FOLDS = 5


def fold_of(case_id: str, folds: int = FOLDS) -> int:
    return int(hashlib.sha256(f"cv:{case_id}".encode()).hexdigest(), 16) % folds


@dataclass
class Tally:
    n: int = 0
    top1: int = 0
    top3: int = 0

    def add(self, cause: str, ranked: list[str]) -> None:
        self.n += 1
        self.top1 += ranked[:1] == [cause]
        self.top3 += cause in ranked[:3]

    def as_dict(self) -> dict:
        return {"n": self.n, "top1": self.top1, "top3": self.top3}


def group_of(case_id: str) -> str:
    """The source a case comes from: its id without the trailing thread number (`pytorch-pytorch-1234`)."""
    return re.sub(r"-\d+$", "", case_id)


def folds_of(cases: tuple[CorpusCase, ...], folds: int) -> list[list[CorpusCase]]:
    """K folds by a hash of the id; folds == 0: one fold per source repository (group_of)."""
    if folds == 0:
        groups: dict[str, list[CorpusCase]] = {}
        for c in cases:
            groups.setdefault(group_of(c.id), []).append(c)
        return [groups[g] for g in sorted(groups)]
    out: list[list[CorpusCase]] = [[] for _ in range(folds)]
    for c in cases:
        out[fold_of(c.id, folds)].append(c)
    return out


def retrieval_cv(root: Path = CORPUS, folds: int = FOLDS, references_root: Path | None = None) -> dict:
    """Retrieval alone: each fold's queries ranked by an index built without that fold."""
    from distdoctor import paths
    from distdoctor.diagnose.engine import retrieval_query
    from distdoctor.diagnose.retrieval import KnownFailures, documents, excluding

    known = KnownFailures(documents(str(references_root or paths.REFERENCES), str(root)))
    tally = Tally()
    for fold in folds_of(train_cases(str(root)), folds):
        with excluding({f"corpus:{c.id}" for c in fold}):  # out of the index and its statistics
            for c in fold:
                query = retrieval_query(c.log, c.context or None, references_root)
                tally.add(c.cause, [m.cause for m in known.similar(query)])
    return tally.as_dict()


SHARE_BINS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def share_precision(root: Path = CORPUS, folds: int = FOLDS, references_root: Path | None = None) -> dict:
    """Per text kind (printed, prose) and share bin [lo, hi): how many causes retrieval ranked second or lower
    with that share of the best cause's votes, and how many of them were the case's cause; `causes`: how many
    causes retrieval can name (1 / causes is a guess's precision)."""
    from distdoctor import paths
    from distdoctor.diagnose import retrieval
    from distdoctor.diagnose.engine import retrieval_query
    from distdoctor.diagnose.retrieval import KnownFailures, documents

    docs = documents(str(references_root or paths.REFERENCES), str(root))
    out: dict = {"causes": len({d[1] for d in docs}), "bins": list(SHARE_BINS), "printed": {}, "prose": {}}
    saved = retrieval.SIMILAR_TOP, retrieval.SIMILAR_MIN
    retrieval.SIMILAR_TOP, retrieval.SIMILAR_MIN = len(docs), 0.0  # every cause the neighbours vote for
    try:
        for fold in folds_of(train_cases(str(root)), folds):
            ids = {f"corpus:{c.id}" for c in fold}
            known = KnownFailures([d for d in docs if d[0] not in ids])
            for c in fold:
                for m in known.similar(retrieval_query(c.log, c.context or None, references_root))[1:]:
                    lo = max(b for b in SHARE_BINS[:-1] if b <= m.score)
                    n, k = out[c.text if c.text == "prose" else "printed"].get(lo, (0, 0))
                    out[c.text if c.text == "prose" else "printed"][lo] = (n + 1, k + (m.cause == c.cause))
    finally:
        retrieval.SIMILAR_TOP, retrieval.SIMILAR_MIN = saved
    return out


def signature_cases(cases: tuple[CorpusCase, ...],
                    references_root: Path | None = None) -> dict[tuple[str, int], set[str]]:
    """(cause, signature index) -> the ids of the cases with a line (of the log or the description) it matches."""
    from distdoctor.diagnose.matcher import matcher_for

    matcher = matcher_for(references_root)
    out: dict[tuple[str, int], set[str]] = {}
    for c in cases:
        for line in (c.log + "\n" + c.context).splitlines():
            for sig in matcher.match_line(line):
                out.setdefault((sig.cause, sig.index), set()).add(c.id)
    return out


def own_signatures_dropper(matched: dict[tuple[str, int], set[str]]
                           ) -> Callable[[list[CorpusCase]], AbstractContextManager]:
    """For diagnosed()'s fold_context: a fold goes without the signatures that only its cases match (`matched`:
    signature_cases of the whole split), those written from its logs as far as the corpus can tell."""
    from distdoctor.diagnose.matcher import without_signatures

    def own_signatures_out(fold: list[CorpusCase]) -> AbstractContextManager:
        ids = {c.id for c in fold}
        return without_signatures({k for k, where in matched.items() if where <= ids})

    return own_signatures_out


def diagnosed(cases: tuple[CorpusCase, ...], folds: int, references_root: Path | None = None,
              fold_context: Callable[[list[CorpusCase]], AbstractContextManager] | None = None,
              ) -> Iterator[tuple[CorpusCase, dict]]:
    """(case, diagnosis) for every case, each fold diagnosed with its cases left out of retrieval and inside
    `fold_context(fold)` when given (signatures dropped, other root lists: what a harness varies per fold)."""
    from distdoctor.diagnose import diagnose_text
    from distdoctor.diagnose.retrieval import excluding

    for fold in folds_of(cases, folds):
        with excluding({f"corpus:{c.id}" for c in fold}), (fold_context(fold) if fold_context else nullcontext()):
            for c in fold:
                yield c, diagnose_text(c.log, context=c.context or None, name=f"{c.id}.log",
                                       references_root=references_root)


def diagnosis_cv(root: Path = CORPUS, folds: int = FOLDS, references_root: Path | None = None,
                 drop_own: bool = False) -> dict:
    """The whole diagnosis, each fold with its cases left out of retrieval (and, with drop_own, the signatures
    only its cases match left out of the matcher)."""
    from distdoctor.diagnose.retrieval import use_corpus

    every, fallback, confident = Tally(), Tally(), Tally()
    misses: list[dict] = []
    by_level: dict[str, Tally] = {}
    cases = train_cases(str(root))
    matched = signature_cases(cases, references_root) if drop_own else {}

    use_corpus(root)
    try:
        for c, r in diagnosed(cases, folds, references_root, own_signatures_dropper(matched)):
            ranked = [x["id"] for x in r["causes"]]
            every.add(c.cause, ranked)
            (fallback if r["verdict"] != "confident" else confident).add(c.cause, ranked)
            level = r["causes"][0].get("level") if r["causes"] else None
            by_level.setdefault(f"{r['verdict']}/{level}", Tally()).add(c.cause, ranked)
            if ranked[:1] != [c.cause]:
                misses.append({"id": c.id, "cause": c.cause, "top3": ranked[:3], "verdict": r["verdict"],
                               "level": level, "text": c.text})
    finally:
        use_corpus(None)
    return {"all": every.as_dict(), "retrieval_level": fallback.as_dict(), "confident": confident.as_dict(),
            "by_level": {k: t.as_dict() for k, t in sorted(by_level.items())}, "misses": misses}


def _frac(t: dict, key: str) -> str:
    return f"{t[key]}/{t['n']}" + (f" ({100 * t[key] / t['n']:.1f}%)" if t["n"] else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="retrieval_cv", description=__doc__.split("\n\n")[0],
                                 epilog="Only the train split is read; held-out cases never reach the index or "
                                        "the figures.")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="corpus folder (default evals/corpus/)")
    ap.add_argument("--folds", type=int, default=FOLDS, help=f"number of folds (default {FOLDS})")
    ap.add_argument("--grouped", action="store_true", help="one fold per source repository (leave one repository "
                                                           "out) instead of --folds")
    ap.add_argument("--drop-own-signatures", action="store_true", help="the diagnosis of a fold also goes without "
                    "the signatures that no train case outside it matches")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--misses", action="store_true", help="also list the train cases whose diagnosis has a wrong "
                                                          "top-1 (ids of the train split only)")
    ap.add_argument("--shares", action="store_true", help="only the precision of retrieval's second and later "
                                                           "causes per share of the best cause's votes")
    args = ap.parse_args(argv)
    if args.grouped:
        args.folds = 0
    elif args.folds < 2:
        print(f"retrieval_cv: --folds {args.folds}: at least 2 folds are needed", file=sys.stderr)
        return 2
    if not args.corpus.is_dir():
        print(f"retrieval_cv: --corpus {args.corpus}: not a folder", file=sys.stderr)
        return 2
    if not train_cases(str(args.corpus)):
        print(f"retrieval_cv: --corpus {args.corpus}: no train case in it", file=sys.stderr)
        return 2
    if args.shares:
        sh = share_precision(args.corpus, args.folds)
        if args.json:
            print(json.dumps({k: ({str(b): v for b, v in t.items()} if isinstance(t, dict) else t)
                              for k, t in sh.items()}, indent=2))
            return 0
        print(f"retrieval's second and later causes, {'repository' if args.grouped else args.folds} folds of the train split of {args.corpus} "
              f"(a guess among {sh['causes']} causes: {100 / sh['causes']:.1f}%)")
        for text in ("printed", "prose"):
            for lo, hi in zip(SHARE_BINS, SHARE_BINS[1:]):
                n, k = sh[text].get(lo, (0, 0))
                print(f"  {text:<7} share [{lo:.2f}, {hi:.2f}{']' if hi == 1 else ')'}  {k}/{n} right"
                      + (f" ({100 * k / n:.1f}%)" if n else ""))
        return 0
    res = {"folds": "repository" if args.grouped else args.folds, "retrieval": retrieval_cv(args.corpus, args.folds),
           "diagnosis": diagnosis_cv(args.corpus, args.folds, drop_own=args.drop_own_signatures)}
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    r, d = res["retrieval"], res["diagnosis"]
    how = "leave-one-repository-out" if args.grouped else f"{args.folds}-fold"
    own = ", signatures only the fold matches left out" if args.drop_own_signatures else ""
    print(f"{how} cross-validation on the train split of {args.corpus}{own}")
    print(f"  retrieval alone          top-1 {_frac(r, 'top1')}  top-3 {_frac(r, 'top3')}")
    for key, words in (("all", "diagnosis, all cases     "), ("retrieval_level", "diagnosis, not confident"),
                       ("confident", "diagnosis, confident     ")):
        print(f"  {words} top-1 {_frac(d[key], 'top1')}  top-3 {_frac(d[key], 'top3')}")
    if args.misses:
        print("  by verdict / level of the top cause: " + "; ".join(f"{k} {_frac(t, 'top1')}"
                                                                  for k, t in d["by_level"].items()))
        print("train cases whose top-1 is wrong (case, expected, top-3, verdict, level of the top cause):")
        for m in d["misses"]:
            print(f"  {m['id']}  {m['cause']}  [{', '.join(m['top3'])}]  {m['verdict']}  {m['level']}"
                  + ("  (prose)" if m["text"] == "prose" else ""))
    return 0


if __name__ == "__main__":
    from distdoctor.cli import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main))
