"""Score the built-in diagnosis on the real-log corpus (evals/corpus/), per split and per source kind.

Figures: top-1, top-3, no answer, how often the answer is confident and how often a confident answer is right,
and the first failing rank on the cases whose log shows one. The log figures count `text: printed` cases only;
`text: prose` cases (the thread holds no printed failure text, only people's words) get their own rows. A train
case is diagnosed with itself left out of retrieval (it would find its own log); held-out cases are never in the
retrieval index at all.
The public logs of tests/data/logs (`public_*`) can be scored the same way as a development set: the
signatures were written from them, so they are reported apart and never as held out.
A held-out case whose thread the knowledge base quotes or cites (references/*.md, the public logs' sources) is no
longer unseen: it is scored in its own split, `heldout_cited`, and left out of the held-out figures.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from distdoctor import paths
from distdoctor.corpus import CORPUS, CorpusCase, load_corpus

LOGS = paths.ROOT / "tests" / "data" / "logs"
URL = re.compile(r"https?://[^\s)\]>`'\"|,]+")


def normal_url(url: str) -> str:
    """A thread's address compared loosely: no scheme, fragment, query or trailing slash; lower case."""
    url = url.split("#", 1)[0].split("?", 1)[0].rstrip("/.").lower()
    return url.split("://", 1)[-1].removeprefix("www.")


def cited_sources(root: Path = paths.ROOT) -> set[str]:
    """Every thread the knowledge base quotes or cites: URLs in references/*.md and the sources of the public
    logs of tests/data/logs (their signatures were written from them); and the held-out cases listed in
    evals/corpus/SEEN_HELDOUT.yaml, which a developer saw."""
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((root / "references").glob("*.md"))]
    texts += [p.read_text(encoding="utf-8", errors="replace")
              for p in sorted((root / "tests" / "data" / "logs").glob("public_*.meta.yaml"))]
    seen = root / "evals" / "corpus" / "SEEN_HELDOUT.yaml"  # held-out cases a developer saw: not unseen either
    if seen.is_file():
        texts.append(seen.read_text(encoding="utf-8", errors="replace"))
    return {normal_url(u) for t in texts for u in URL.findall(t)}


def mark_cited(cases: list[CorpusCase], cited: set[str]) -> list[CorpusCase]:
    """Held-out cases whose source the knowledge base cites move to the split `heldout_cited`."""
    return [replace(c, split="heldout_cited") if c.split == "heldout" and normal_url(c.source) in cited else c
            for c in cases]


@dataclass
class CorpusResult:
    id: str
    split: str
    kind: str
    cause: str
    got: str | None
    top3: list[str]
    verdict: str
    level: str | None
    first_rank_expected: int | None
    first_rank_got: int | None
    text: str = "printed"
    confidence: str = "confirmed"  # how sure the case's label is (evals/corpus/README.md)

    @property
    def top1_ok(self) -> bool:
        return self.got == self.cause

    @property
    def top3_ok(self) -> bool:
        return self.cause in self.top3

    @property
    def rank_ok(self) -> bool | None:
        return None if self.first_rank_expected is None else self.first_rank_got == self.first_rank_expected


def diagnose_case(case: CorpusCase, references_root: Path | None = None) -> CorpusResult:
    from distdoctor.diagnose import diagnose_text
    from distdoctor.diagnose.retrieval import excluding

    with excluding({f"corpus:{case.id}"}):
        r = diagnose_text(case.log, context=case.context or None, name=f"{case.id}.log",
                          references_root=references_root)
    ids = [c["id"] for c in r["causes"]]
    ff = r.get("first_failure") or {}
    return CorpusResult(case.id, case.split, case.kind, case.cause, ids[0] if ids else None, ids[:3],
                        r.get("verdict", "confident" if ids else "none"), r["causes"][0].get("level") if ids else None,
                        case.first_failure_rank, ff.get("rank"), case.text, case.confidence)


def public_logs(logs: Path = LOGS) -> list[CorpusCase]:
    """The public_* logs of tests/data/logs as corpus cases (the development set)."""
    out = []
    for meta_path in sorted(logs.glob("public_*.meta.yaml")):
        name = meta_path.name[:-len(".meta.yaml")]
        log = logs / f"{name}.log"
        if not log.is_file():
            continue
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
        out.append(CorpusCase(name, log.read_text(encoding="utf-8", errors="replace"), meta["source"],
                              meta["expected_cause"], "confirmed", "dev", None, meta.get("first_failure_rank"),
                              meta.get("context") or ""))
    return out


def summary(results: list[CorpusResult]) -> dict:
    n = len(results)
    conf = [r for r in results if r.verdict == "confident"]
    ranked = [r for r in results if r.rank_ok is not None]
    return {"n": n, "top1": sum(r.top1_ok for r in results), "top3": sum(r.top3_ok for r in results),
            "no_answer": sum(r.got is None for r in results), "confident": len(conf),
            "confident_right": sum(r.top1_ok for r in conf), "ranks": len(ranked),
            "ranks_right": sum(bool(r.rank_ok) for r in ranked)}


def answer_level(r: CorpusResult) -> str:
    """`verdict/level` of the answer's top cause (`confident/signature`, `candidates/similar`, ...); `none`."""
    return f"{r.verdict}/{r.level}" if r.got else "none"


def by_text(results: list[CorpusResult]) -> tuple[list[CorpusResult], list[CorpusResult]]:
    """(printed, prose): the log figures are taken on the first, the prose cases are reported apart."""
    return [r for r in results if r.text != "prose"], [r for r in results if r.text == "prose"]


def score_corpus(root: Path = CORPUS, include_public: bool = True, causes: set[str] | None = None,
                 errors: list[str] | None = None, references_root: Path | None = None,
                 cited: set[str] | None = None, train_only: bool = False) -> list[CorpusResult]:
    """Diagnose every valid corpus case (bad ones go to `errors`), and the public dev logs when asked. `cited`:
    the threads the knowledge base cites (default: the project's, `cited_sources()`). `train_only`: the train
    split alone; held-out files are never read (load_corpus(split="train"))."""
    cases = mark_cited(load_corpus(root, causes, errors if errors is not None else [],
                                   split="train" if train_only else None),
                       cited_sources() if cited is None else cited)
    if include_public:
        cases += public_logs()
    return [diagnose_case(c, references_root) for c in cases]


def to_json(results: list[CorpusResult], errors: list[str] | None = None) -> dict:
    """Per split: the summary counts of the printed logs, per source kind, label confidence and answer level
    within it, and the prose cases' counts apart (`prose`); the refused cases."""
    out: dict = {"splits": {}, "refused": list(errors or [])}
    by_split: dict[str, list[CorpusResult]] = defaultdict(list)
    for r in results:
        by_split[r.split].append(r)
    for split, rs in sorted(by_split.items()):
        printed, prose = by_text(rs)
        kinds: dict[str, list[CorpusResult]] = defaultdict(list)
        labels: dict[str, list[CorpusResult]] = defaultdict(list)
        levels: dict[str, list[CorpusResult]] = defaultdict(list)
        for r in printed:
            kinds[r.kind].append(r)
            labels[r.confidence].append(r)
            levels[answer_level(r)].append(r)
        out["splits"][split] = {**summary(printed), "per_kind": {k: summary(v) for k, v in sorted(kinds.items())},
                                "per_confidence": {k: summary(v) for k, v in sorted(labels.items())},
                                "per_level": {k: summary(v) for k, v in sorted(levels.items())},
                                "prose": summary(prose)}
    return out


def _frac(k: int, n: int) -> str:
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "—"


SPLIT_WORDS = {"heldout": "held out (never used for signatures or retrieval)",
               "heldout_cited": "held out, but its thread is cited in references/ or tests/data/logs (not unseen; "
                                "left out of the held-out figures)",
               "train": "train",
               "dev": "tests/data/logs public_* (signatures written from them)"}


def split_rows(results: list[CorpusResult]) -> list[tuple[str, str, dict]]:
    """(split, text, summary) per row of the tables: printed logs of each split, then its prose cases where it
    has any; a split with no case at all (the held-out ones under --train-only, dev) has no row."""
    by_split: dict[str, list[CorpusResult]] = defaultdict(list)
    for r in results:
        by_split[r.split].append(r)
    rows = []
    for split in ("heldout", "heldout_cited", "train", "dev"):
        printed, prose = by_text(by_split.get(split, []))
        if not printed and not prose:
            continue
        rows.append((split, "printed", summary(printed)))
        if prose:
            rows.append((split, "prose", summary(prose)))
    return rows


def render_markdown(results: list[CorpusResult], errors: list[str] | None = None) -> str:
    md = ["## Real-log corpus (`evals/corpus/`)", "",
          "The built-in diagnosis on real logs quoted from public threads. Split by the frozen rule of "
          "`evals/corpus/README.md`; train cases are diagnosed with their own log left out of retrieval. "
          "*Confident*: the answer rests on a signature or the failure's structure (a top cause with a fix); "
          "otherwise the answer is candidates to confirm. *First rank*: cases whose log shows the first failing rank. "
          "*Text*: `printed`, the case's log is what the program, launcher or library printed (the log figures); "
          "`prose`, the thread holds no printed failure text and the case is people's words (a title, a "
          "description), a different task reported in its own row.",
          "",
          "| split | text | cases | top-1 | top-3 | no answer | confident | confident and right | first rank right |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for split, text, s in split_rows(results):
        md.append(f"| {SPLIT_WORDS[split]} | {text} | {s['n']} | {_frac(s['top1'], s['n'])} | "
                  f"{_frac(s['top3'], s['n'])} | {_frac(s['no_answer'], s['n'])} | "
                  f"{_frac(s['confident'], s['n'])} | {_frac(s['confident_right'], s['confident'])} | "
                  f"{_frac(s['ranks_right'], s['ranks'])} |")
    md += _grouped(results, "Per source kind (printed logs)", "source kind", lambda r: r.kind)
    md += _grouped(results, "Per label confidence (printed logs)", "label", lambda r: r.confidence,
                   "How sure each case's label is (`confidence` in its meta): `confirmed`, the thread confirms the "
                   "cause or its fix; `likely`; `uncertain`, the root is unclear. A label taken from a thread's fix "
                   "can name a cause the printed text does not show.")
    md += _grouped(results, "Per answer level (printed logs)", "answer rests on", answer_level,
                   "What the answer's top cause rests on (its verdict and level, as the report prints them): how often "
                   "an answer of that kind was right, the calibration a reader of the report needs (a `candidates` "
                   "answer resting on a similar known log alone is a lead to confirm, not a finding).")
    md += _track_check(results)
    misses = [r for r in results if not r.split.startswith("heldout") and not r.top1_ok]
    md += ["", "### Wrong top-1 outside the held-out split", ""]
    if misses:
        md += ["| case | split | text | expected | answered (level) | top-3 |", "|---|---|---|---|---|---|"]
        md += [f"| {r.id} | {r.split} | {r.text} | `{r.cause}` | {r.got or '(none)'} ({r.level or '—'}) | "
               f"{', '.join(r.top3)} |" for r in misses]
    else:
        md.append("None.")
    md += ["", "Held-out misses are counted above, never listed: nobody tunes on them."]
    if errors:
        md += ["", "### Corpus cases refused by the loader", ""] + [f"- {e}" for e in errors]
    return "\n".join(md) + "\n"


def track_check(results: list[CorpusResult]) -> dict[tuple[str, str], tuple[int, float, int]]:
    """(split, verdict) -> (printed logs whose answer has a track record, right as the records expect, right):
    do the records, measured on the train split (references/track_record.yaml), hold on the other splits?"""
    from distdoctor.knowledge import track_record

    out: dict[tuple[str, str], tuple[int, float, int]] = {}
    for r in by_text(results)[0]:
        rec = track_record(r.got, r.verdict) if r.got else None
        if rec:
            n, expected, right = out.get((r.split, r.verdict), (0, 0.0, 0))
            out[(r.split, r.verdict)] = (n + 1, expected + rec["right"] / rec["answered"], right + r.top1_ok)
    return out


def _track_check(results: list[CorpusResult]) -> list[str]:
    rows = track_check(results)
    if not rows:
        return []
    md = ["", "### Track records against the splits (printed logs)", "",
          "The diagnosis prints, beside its answer, how often that answer (cause named first, verdict) was right on "
          "train logs of repositories left out (`references/track_record.yaml`, `python -m "
          "distdoctor.evals.track_record`). Here: the answers that have a record, the right answers the records "
          "expect (the sum of their rates) and the right answers found. Held out is the honest check; train is "
          "diagnosed with every signature, so it beats its own records.", "",
          "| split | verdict | answers with a record | right, expected | right, found |", "|---|---|---:|---:|---:|"]
    for (split, verdict), (n, expected, right) in sorted(rows.items()):
        md.append(f"| {split} | {verdict} | {n} | {expected:.1f} ({100 * expected / n:.1f}%) | {_frac(right, n)} |")
    return md


def _grouped(results: list[CorpusResult], title: str, column: str, key, note: str = "") -> list[str]:
    """A markdown table of the printed logs' figures per split and per `key(result)`."""
    md = ["", f"### {title}", ""] + ([note, ""] if note else []) + [
        f"| split | {column} | cases | top-1 | top-3 | no answer | first rank right |",
        "|---|---|---:|---:|---:|---:|---:|"]
    groups: dict[tuple[str, str], list[CorpusResult]] = defaultdict(list)
    for r in by_text(results)[0]:
        groups[(r.split, key(r))].append(r)
    for (split, value), rs in sorted(groups.items()):
        s = summary(rs)
        md.append(f"| {split} | {value} | {s['n']} | {_frac(s['top1'], s['n'])} | {_frac(s['top3'], s['n'])} | "
                  f"{_frac(s['no_answer'], s['n'])} | {_frac(s['ranks_right'], s['ranks'])} |")
    return md


def render_text(results: list[CorpusResult]) -> str:
    lines = ["real-log corpus (split, text: cases, top-1, top-3, no answer, first rank right; "
             "printed logs, prose cases apart):"]
    for split, text, s in split_rows(results):
        lines.append(f"  {split:<13} {text:<7} {s['n']:>4}  {_frac(s['top1'], s['n'])}  {_frac(s['top3'], s['n'])}  "
                     f"{_frac(s['no_answer'], s['n'])}  {_frac(s['ranks_right'], s['ranks'])}")
    return "\n".join(lines)
