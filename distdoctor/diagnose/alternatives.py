"""Alternatives after a confident top cause: what else the log's evidence supports, weakest reading shown.

A confident answer (a signature or the failure's structure names its top cause) lists up to ALTERNATIVES more
causes after the ones its log scored: known failures whose message template the log's failures share
(`structural`), then BM25 neighbours with at least ALT_SIMILAR_MIN of the best cause's votes (`similar`), then,
when the top cause is a symptom of others (a collective timeout, a peer that died first, an unreachable
rendezvous), the roots the taxonomy says usually lie behind it (`often_behind` in references/taxonomy.yaml, in its
order: level `typical`, what the knowledge base expects, not read in the log). Each carries its level and what to
check, never a patch; they come after every scored cause, so the top cause, its level and its fix are those of the
answer without them.

A cause the knowledge base has read off the log's own line and ruled out is not brought back: one whose signature
matched a line but an `unless` (`unless_ranks_differ`) condition the input meets switched it off, or whose `when`
condition is unmet where another cause's signature on the log is the other reading of the same condition (its
`unless`): the two readings of one line, decided. A `when` left unmet without such a pair (several jobs on one
machine for `port_in_use`, SyncBatchNorm for `syncbn_without_gpu_ddp`) is only something the log does not show.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

from distdoctor.diagnose import calibrate
from distdoctor.diagnose.matcher import CompiledSignature, differs_key

ALTERNATIVES = 2  # causes after a confident top cause: what a top-3 needs
# a BM25 neighbour's share of the best cause's votes that makes it an alternative: on the train split (5 folds,
# `python -m distdoctor.evals.retrieval_cv --shares`) a cause retrieval ranks second or lower is right 0-2% of the
# time under 0.2, 2.8% at 0.2-0.3 (a guess among 53 causes: 1.9%) and 8-14% at 0.3 and above (printed logs)
ALT_SIMILAR_MIN = 0.3


def _switches_off(sig: CompiledSignature) -> set[str]:
    """The conditions that, met, switch this signature off."""
    return {c for c in (sig.unless, sig.not_differs and differs_key(sig.not_differs)) if c}


def _needs(sig: CompiledSignature) -> set[str]:
    """The conditions this signature needs met."""
    return {c for c in (sig.when, sig.differs and differs_key(sig.differs)) if c}


def ruled_out(matched: Iterable[CompiledSignature], seen: set[str]) -> set[str]:
    """Causes whose signatures matched the input but whose conditions rule them out (see the module's doc)."""
    matched = list(matched)
    other_reading = {c: {s.cause for s in matched if s.active(seen) and c in _switches_off(s)}
                     for s in matched for c in _needs(s)}
    out = set()
    for s in matched:
        if s.active(seen):
            continue
        if _switches_off(s) & seen or any(other_reading.get(c, set()) - {s.cause} for c in _needs(s) - seen):
            out.add(s.cause)
    return out


_OVERRIDE: list[dict[str, tuple[str, ...]] | None] = [None]


@contextmanager
def using_roots(roots: dict[str, tuple[str, ...]]) -> Iterator[None]:
    """Read `roots` instead of the taxonomy's often_behind (the evals' cross-validation: lists estimated without
    the scored case's group)."""
    saved, _OVERRIDE[0] = _OVERRIDE[0], roots
    try:
        yield
    finally:
        _OVERRIDE[0] = saved


def roots_of(cause: str, references_root=None) -> tuple[str, ...]:
    """The usual roots of a symptom cause, in order (empty for a cause that is a root itself)."""
    from distdoctor.knowledge import often_behind

    table = _OVERRIDE[0] if _OVERRIDE[0] is not None else often_behind(references_root)
    return tuple(table.get(cause, ()))


def typical(top: str, roots: Iterable[str]) -> list[tuple[str, float, dict]]:
    """The usual roots of the top cause as (cause, score 0, evidence): the knowledge base's expectation only."""
    return [(root, 0.0, {"file": "references/taxonomy.yaml", "line": None, "text": f"{top}: often_behind {root}",
                         "rank": None, "kind": "typical",
                         "proves": f"{root} often shows in a log as {top} (taxonomy often_behind); "
                                   "not read in this log"})
            for root in roots]


def pick(structural: list[tuple[str, float, dict]], similar, entries: dict, causes: list[dict],
         excluded: set[str], roots: Iterable[str] = ()) -> list[dict]:
    """The alternatives to append to `causes`: (cause, score, evidence line) from the structural matches, then,
    when places are left, from `similar()` (called only then: retrieval is not loaded for nothing), then the top
    cause's usual `roots` (level `typical`)."""
    taken = {c["id"] for c in causes}
    out: list[dict] = []

    def room() -> bool:
        return len(causes) + len(out) <= ALTERNATIVES

    def add(found: Iterable[tuple[str, float, dict]]) -> None:
        for cause, score, ev in found:
            if not room():
                return
            if cause in taken or cause in excluded or cause not in entries:
                continue
            taken.add(cause)
            ev["level"] = calibrate.level_of(ev)
            e = entries[cause]
            out.append({"id": cause, "score": round(score, 2), "level": ev["level"], "title": e.title,
                        "entry": e.anchor, "patch": None, "patch_ready": False, "patch_note": None,
                        "check": calibrate.check_for(e), "evidence": [ev]})

    add(structural)
    if room():
        add(similar())
    if room() and causes:
        add(typical(causes[0]["id"], roots))
    return out
