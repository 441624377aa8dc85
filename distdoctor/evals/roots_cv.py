"""How much the taxonomy's `often_behind` lists add to top-3, on the corpus's TRAIN split only (held-out cases are
never loaded), leave-one-repository-out (retrieval_cv's grouping: a case's own source is out of the index).

Four readings of the usual roots behind a symptom cause, each scored over every train case:
- `none`: no list (the answers without the filler);
- `taxonomy`: the lists as committed in references/taxonomy.yaml (ordered with the whole train split in view: an
  optimistic figure for their order);
- `kb`: from the knowledge base's text alone, no label read: the cause's entry's `related`, then the entries that
  name it in theirs, for the causes the taxonomy gives a list;
- `held_out_groups`: the same candidates, ordered by how often each was the label of a confident answer naming the
  symptom cause first, counted on the OTHER source repositories only (the scored case's group left out): the honest
  estimate of ordering the lists from the train labels;
- `every_cause`: held_out_groups, plus a list for EVERY cause a confident answer names first: the labels behind it
  on at least --min-count cases of the other repositories (would lists beyond the three symptom causes help?).

    python -m distdoctor.evals.roots_cv [--corpus DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from distdoctor.corpus import CORPUS, train_cases
from distdoctor.evals.retrieval_cv import Tally, diagnosed, group_of

Roots = dict[str, tuple[str, ...]]


def kb_candidates(symptoms: list[str]) -> Roots:
    """For each symptom cause: its entry's `related`, then the entries whose `related` names it (file order)."""
    from distdoctor.knowledge import load_entries

    entries = load_entries()
    by = {e.cause: e for e in entries}
    out: Roots = {}
    for s in symptoms:
        own = list(by[s].related) if s in by else []
        out[s] = tuple(dict.fromkeys(own + [e.cause for e in entries if s in e.related and e.cause != s]))
    return out


def ordered_by_counts(candidates: Roots, counts: dict[str, Counter], tie: Roots) -> Roots:
    """Each list's candidates by count (most first), ties in `tie`'s order, then in the candidates' order."""
    def key(s: str, c: str, i: int) -> tuple:
        pos = tie.get(s, ())
        return (-counts.get(s, Counter())[c], pos.index(c) if c in pos else len(pos), i)
    return {s: tuple(c for _, c in sorted(((key(s, c, i), c) for i, c in enumerate(cands)))) for s, cands in
            candidates.items()}


def every_cause(counts: dict[str, Counter], symptom_lists: Roots, min_count: int) -> Roots:
    """Lists for every cause a confident answer named first: the labels behind it at least `min_count` times on
    the other repositories, most first; the symptom causes keep their own lists."""
    out: Roots = {top: tuple(c for c, n in cnt.most_common() if n >= min_count) for top, cnt in counts.items()}
    out.update(symptom_lists)
    return {k: v for k, v in out.items() if v}


def _diagnose_all(cases, roots_for) -> list[tuple[object, dict]]:
    """Every case diagnosed with its group out of retrieval and `roots_for(group)` as the lists."""
    from distdoctor.diagnose import alternatives

    def lists(fold):
        return alternatives.using_roots(roots_for(group_of(fold[0].id)))

    return list(diagnosed(cases, 0, fold_context=lists))


def roots_cv(root: Path = CORPUS, min_count: int = 2) -> dict:
    from distdoctor.diagnose.retrieval import use_corpus
    from distdoctor.knowledge import often_behind

    committed = {s: r for s, r in often_behind().items() if r}
    kb = kb_candidates(sorted(committed))
    cases = train_cases(str(root))
    use_corpus(root)
    try:
        base = _diagnose_all(cases, lambda g: {})
        # confident answers naming a cause first whose label is another cause, per source repository (the symptom
        # causes' for their lists; every cause's for `every_cause`)
        behind: dict[str, dict[str, Counter]] = {}
        for c, r in base:
            top = r["causes"][0]["id"] if r["causes"] else None
            if r["verdict"] == "confident" and top is not None and c.cause != top:
                behind.setdefault(group_of(c.id), {}).setdefault(top, Counter())[c.cause] += 1

        def without(group: str) -> dict[str, Counter]:
            total: dict[str, Counter] = {}
            for g, per in behind.items():
                if g != group:
                    for s, cnt in per.items():
                        total.setdefault(s, Counter()).update(cnt)
            return total

        def every_cause_for(group: str) -> Roots:
            counts = without(group)  # summed once per fold, for both lists
            return every_cause(counts, ordered_by_counts(kb, counts, committed), min_count)

        readings = {"none": base,
                    "taxonomy": _diagnose_all(cases, lambda g: committed),
                    "kb": _diagnose_all(cases, lambda g: kb),
                    "held_out_groups": _diagnose_all(cases, lambda g: ordered_by_counts(kb, without(g), committed)),
                    "every_cause": _diagnose_all(cases, every_cause_for)}
    finally:
        use_corpus(None)
    res: dict = {"lists": {"taxonomy": committed, "kb": kb}}
    for name, rows in readings.items():
        every, confident, short = Tally(), Tally(), 0
        for c, r in rows:
            ranked = [x["id"] for x in r["causes"]]
            every.add(c.cause, ranked)
            if r["verdict"] == "confident":
                confident.add(c.cause, ranked)
                short += len(ranked) < 3
        res[name] = {"all": every.as_dict(), "confident": confident.as_dict(), "confident_under_3": short}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="roots_cv", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="corpus folder (default evals/corpus/)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--min-count", type=int, default=2, metavar="N",
                    help="every_cause: a label behind a top cause on at least N other-repository cases (default 2)")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir() or not train_cases(str(args.corpus)):
        print(f"roots_cv: --corpus {args.corpus}: no train case in it", file=sys.stderr)
        return 2
    res = roots_cv(args.corpus, args.min_count)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"leave-one-repository-out, train split of {args.corpus}: top-3 with each reading of often_behind")
    for name in ("none", "taxonomy", "kb", "held_out_groups", "every_cause"):
        a, c = res[name]["all"], res[name]["confident"]
        print(f"  {name:<16} all top-3 {a['top3']}/{a['n']}  confident top-3 {c['top3']}/{c['n']}  "
              f"confident with < 3 causes {res[name]['confident_under_3']}")
    return 0


if __name__ == "__main__":
    from distdoctor.cli import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main))
