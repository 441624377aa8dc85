"""Results per case kind (short log, words only, large log, hang, fix), and the skill's lift: the same
responder with the skill available and with it absent, per kind and per case."""

from __future__ import annotations

from distdoctor.evals.agentic import KINDS, AgenticResult
from distdoctor.evals.scoring import Score

Outcome = tuple[str, str, bool | None, str]  # (case id, kind, ok — None when skipped, what it answered)


def outcomes(score: Score | None, agentic: list[AgenticResult] | None) -> list[Outcome]:
    out: list[Outcome] = []
    for r in score.results if score else []:
        out.append((r.id, r.kind, r.top1_ok, r.got or f"(none: {r.reason})"))
    for a in agentic or []:
        what = a.reason if a.status == "skipped" else (a.got.get("cause") or f"(none: {a.reason})")
        out.append((a.id, a.kind, None if a.status == "skipped" else a.passed, str(what)))
    return out


def by_kind(score: Score | None, agentic: list[AgenticResult] | None) -> dict[str, dict]:
    """{kind: {n, ran, passed, rate, skipped, seconds}} in KINDS order, kinds with no case left out."""
    secs: dict[str, float] = {}
    for r in score.results if score else []:
        secs[r.kind] = secs.get(r.kind, 0.0) + r.seconds
    for a in agentic or []:
        secs[a.kind] = secs.get(a.kind, 0.0) + a.seconds
    rows: dict[str, dict] = {}
    for kind in KINDS:
        mine = [o for o in outcomes(score, agentic) if o[1] == kind]
        if not mine:
            continue
        ran = [o for o in mine if o[2] is not None]
        passed = sum(bool(o[2]) for o in ran)
        rows[kind] = {"n": len(mine), "ran": len(ran), "passed": passed,
                      "rate": round(passed / len(ran), 4) if ran else None, "skipped": len(mine) - len(ran),
                      "seconds": round(secs.get(kind, 0.0), 1)}
    return rows


def compare(with_skill: list[Outcome], without: list[Outcome]) -> dict:
    """Lift per kind (pass rate with the skill minus without, on the cases both ran) and every case whose
    outcome or answer differs."""
    w = {o[0]: o for o in with_skill}
    wo = {o[0]: o for o in without}
    kinds: dict[str, dict] = {}
    diffs = []
    for cid, (_, kind, ok_w, got_w) in w.items():
        if cid not in wo:
            continue
        _, _, ok_wo, got_wo = wo[cid]
        k = kinds.setdefault(kind, {"n": 0, "ran": 0, "with": 0, "without": 0})
        k["n"] += 1
        if ok_w is None or ok_wo is None:
            continue
        k["ran"] += 1
        k["with"] += bool(ok_w)
        k["without"] += bool(ok_wo)
        if ok_w != ok_wo or (got_w != got_wo and not (got_w.startswith("(none") and got_wo.startswith("(none"))):
            diffs.append({"id": cid, "kind": kind, "with": bool(ok_w), "without": bool(ok_wo),
                          "with_answer": got_w, "without_answer": got_wo,
                          "change": "gained" if ok_w and not ok_wo else ("lost" if ok_wo and not ok_w else "same")})
    for k in kinds.values():
        k["with_rate"] = round(k["with"] / k["ran"], 4) if k["ran"] else None
        k["without_rate"] = round(k["without"] / k["ran"], 4) if k["ran"] else None
        k["lift"] = round(k["with_rate"] - k["without_rate"], 4) if k["ran"] else None
    order = {kind: i for i, kind in enumerate(KINDS)}
    diffs.sort(key=lambda d: (order.get(d["kind"], 99), d["change"] != "gained", d["id"]))
    return {"kinds": {k: kinds[k] for k in sorted(kinds, key=lambda x: order.get(x, 99))}, "cases": diffs}
