"""Score a responder on cases: per-case results, top-1 / top-3, per-cause accuracy, confusions."""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from distdoctor.evals.cases import Case
from distdoctor.evals.responders import Answer, Responder


@dataclass
class CaseResult:
    id: str
    expected_cause: str
    expected_patch: str | None
    got: str | None
    top3: list[str]
    top1_ok: bool
    top3_ok: bool
    patch_ok: bool | None  # None when the case expects no patch
    reason: str | None  # why the answer is unusable (timeout, crash, garbage, unknown id)
    seconds: float
    origin: str
    tags: list[str] = field(default_factory=list)
    kind: str = "short_log"  # short_log | words (the kinds of distdoctor.evals.agentic.KINDS a log case has)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Score:
    responder: str
    results: list[CaseResult]
    seconds: float

    @property
    def n(self) -> int:
        return len(self.results)

    @property
    def top1(self) -> float:
        return sum(r.top1_ok for r in self.results) / self.n if self.n else 0.0

    @property
    def top3(self) -> float:
        return sum(r.top3_ok for r in self.results) / self.n if self.n else 0.0

    @property
    def patch_accuracy(self) -> float | None:
        with_patch = [r for r in self.results if r.patch_ok is not None]
        return sum(bool(r.patch_ok) for r in with_patch) / len(with_patch) if with_patch else None

    def per_cause(self) -> dict[str, dict]:
        groups: dict[str, list[CaseResult]] = defaultdict(list)
        for r in self.results:
            groups[r.expected_cause].append(r)
        return {c: {"n": len(rs), "top1": sum(r.top1_ok for r in rs) / len(rs),
                    "top3": sum(r.top3_ok for r in rs) / len(rs),
                    "top1_hits": sum(r.top1_ok for r in rs), "top3_hits": sum(r.top3_ok for r in rs)}
                for c, rs in sorted(groups.items())}

    def per_origin(self) -> dict[str, dict]:
        groups: dict[str, list[CaseResult]] = defaultdict(list)
        for r in self.results:
            groups[r.origin].append(r)
        return {o: {"n": len(rs), "top1": sum(r.top1_ok for r in rs) / len(rs),
                    "top3": sum(r.top3_ok for r in rs) / len(rs)} for o, rs in sorted(groups.items())}

    def confusions(self) -> list[tuple[str, str, int, list[str]]]:
        """(expected, got, count, case ids) for every wrong top-1, most frequent first."""
        ids: dict[tuple[str, str], list[str]] = defaultdict(list)
        for r in self.results:
            if not r.top1_ok:
                ids[(r.expected_cause, r.got or f"(none: {_short(r.reason)})")].append(r.id)
        return sorted(((e, g, len(v), v) for (e, g), v in ids.items()), key=lambda t: (-t[2], t[0], t[1]))

    def to_json(self) -> dict:
        return {"responder": self.responder, "n": self.n, "top1": round(self.top1, 4), "top3": round(self.top3, 4),
                "patch_accuracy": None if self.patch_accuracy is None else round(self.patch_accuracy, 4),
                "seconds": round(self.seconds, 2), "per_cause": self.per_cause(), "per_origin": self.per_origin(),
                "confusions": [{"expected": e, "got": g, "count": n, "cases": ids}
                               for e, g, n, ids in self.confusions()],
                "cases": [r.to_json() for r in self.results]}


def _short(reason: str | None) -> str:
    if not reason:
        return "no answer"
    return reason.split(":")[0][:40]


def score_case(case: Case, ans: Answer, causes: set[str] | None = None) -> CaseResult:
    reason = ans.error
    got = ans.cause
    if got and causes is not None and got not in causes:
        reason = reason or f"{got!r} is not a cause id of taxonomy.yaml"
    top3 = ans.top3
    patch_ok = None
    if case.expected_patch:
        patch_ok = ans.patch == case.expected_patch
    return CaseResult(id=case.id, expected_cause=case.expected_cause, expected_patch=case.expected_patch,
                      got=got, top3=top3, top1_ok=got == case.expected_cause,
                      top3_ok=case.expected_cause in top3, patch_ok=patch_ok, reason=reason,
                      seconds=round(ans.seconds, 3), origin=case.origin, tags=list(case.tags),
                      kind="short_log" if case.log.strip() else "words")


def _safe_answer(responder: Responder, case: Case) -> Answer:
    try:
        return responder.answer(case)
    except Exception as exc:  # one responder failure never stops the run
        return Answer(None, error=f"responder raised {type(exc).__name__}: {exc}"[:300])


def score(cases: list[Case], responder: Responder, jobs: int = 1, causes: set[str] | None = None,
          progress: bool = True) -> Score:
    """Answer every case (in `jobs` threads), score each, keep the cases' order."""
    t0 = time.monotonic()
    done = 0

    def one(case: Case) -> CaseResult:
        return score_case(case, _safe_answer(responder, case), causes)

    results: list[CaseResult] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for r in pool.map(one, cases):
            results.append(r)
            done += 1
            if progress and (done % 10 == 0 or done == len(cases)):
                print(f"[evals] {done}/{len(cases)} cases answered", file=sys.stderr, flush=True)
    return Score(responder.name, results, time.monotonic() - t0)
