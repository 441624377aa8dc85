"""How much an answer rests on: a level per evidence line and per cause, and the verdict they allow.

Levels, strongest first:
- `signature`: a knowledge-base signature matched a line of the log;
- `structural`: a failure of the log has the structure of a known one (exception type and message template,
  or a collective mismatch read field by field);
- `symptom`: a line of the log that several causes print (a bare `Too many open files`, torchrun's report that
  some rank failed with no rank's own error shown, a store key nobody set);
- `similar`: retrieval found a known log or entry like this one;
- `words`: only the person's description (--context) names it (an error line pasted into the description
  and matched by a root signature counts as `signature`: it is the log's text, quoted);
- `context`: a line of the log that only says how the job was launched (Open MPI's `[1,0]<stdout>:` tags), or,
  beside a log, a setting keyword of the description or of a log of prose (`--nnodes`, `drop_last`,
  `LOCAL_RANK`: how the job was set up; engine.SETTING_WEIGHT), never what failed: any cause's job shows it;
- `code`: a finding of the static checker in the job's code (`--repo`; distdoctor/diagnose/code_evidence.py):
  beside a log that shows only a symptom or candidates it names the mechanism, and makes a confident answer;
- `typical`: nothing in the input; the knowledge base says this root usually lies behind the top cause, a
  symptom of others (references/taxonomy.yaml `often_behind`): an alternative to check, never a top cause.
Only `signature` and `structural` make a confident answer (a top cause, its fix and patch), and `structural` only
where it is more than a corpus case's message template (similar_log_only: that is a similar known log). A cause
resting on `symptom`, `similar`, `words`, `context` or `typical` is a candidate to confirm, shown with what to check.
"""

from __future__ import annotations

import re

from distdoctor.diagnose import preconditions

LEVELS = ("typical", "context", "words", "similar", "symptom", "code", "structural", "signature")  # weakest first
CONFIDENT = ("structural", "signature")


def level_of(ev: dict) -> str:
    if ev.get("file") == "<context>" or ev.get("kind") == "keyword":
        return "signature" if ev.get("quoted") else "context" if ev.get("context") else "words"
    if ev.get("kind") in ("structural", "similar", "typical"):
        return ev["kind"]
    return "symptom" if ev.get("symptom") else "context" if ev.get("context") else "signature"


def cause_level(evidence: list[dict]) -> str:
    return max((ev.get("level") or level_of(ev) for ev in evidence), key=LEVELS.index, default="words")


WEAK_MARKS = ("symptom", "context")  # signature levels (`level:` in an entry) that mark their lines weak


def tier(evidence: list[dict]) -> int:
    """1 when the log itself shows the cause (confident levels), else 0: ranks come before scores."""
    return int(cause_level(evidence) in CONFIDENT)


def order(evidence: list[dict]) -> int:
    """How causes rank before their scores: shown by the log (confident levels), then shown by a line of the log
    that several causes print (`symptom`), then the rest (retrieval, words)."""
    return 2 if tier(evidence) else int(cause_level(evidence) == "symptom")


def similar_log_only(cause: dict) -> bool:
    """Whether a structural cause rests only on message templates shared with corpus cases (`known`:
    corpus:<id>): a similar known log, found by a nearest-neighbour match, not knowledge about the failure. First
    seen on train (evals/FIRST_SEEN.md) such answers were right 5 of 8 times, a signature's 259 of 291."""
    structural = [ev for ev in cause.get("evidence", ()) if ev.get("level") == "structural"]
    return (cause["level"] == "structural" and bool(structural)
            and all(str(ev.get("known", "")).startswith("corpus:") for ev in structural))


def verdict(causes: list[dict]) -> str:
    """`confident` when the top cause rests on a confident level (not on a similar known log alone:
    similar_log_only) and no other cause ties it (same tier, same score: the log reads alike for both, as NCCL's
    "unhandled system error" for an interface and an unreachable peer, and cannot tell them apart); else
    `candidates`. The order of the causes is the same either way."""
    if not causes:
        return "none"
    tied = len(causes) > 1 and causes[1]["level"] in CONFIDENT and causes[1]["score"] == causes[0]["score"]
    confident = causes[0]["level"] in CONFIDENT and not similar_log_only(causes[0])
    return "confident" if confident and not tied else "candidates"


def needs_more(evidence_of: dict[str, list[dict]], scores: dict[str, float], first) -> bool:
    """Whether to compare the log with known failures: no signature matched the log, or none explains its
    first failure."""
    any_sig = any(scores.get(c, 0) > 0 and level_of(ev) == "signature" for c, evs in evidence_of.items() for ev in evs)
    explained = first is not None and any(h.kind in ("root", "hint") for h in first.hits)
    return not any_sig or (first is not None and not explained)


def patch_gate(patch: str | None, shown: dict[str, dict]) -> dict:
    """{"patch_ready": may the patch be proposed, "patch_note": what shows its precondition, or why not}."""
    if not patch:
        return {"patch_ready": False, "patch_note": None}
    pre = preconditions.PRECONDITIONS.get(patch)
    if pre is None:
        return {"patch_ready": True, "patch_note": None}
    where = shown.get(patch)
    if where is None:
        return {"patch_ready": False, "patch_note": pre.missing}
    line = f":{where['line']}" if where.get("line") is not None else ""
    return {"patch_ready": True, "patch_note": f"{pre.shows} ({where['file']}{line}: {where['text'].strip()[:160]})"}


def check_for(entry) -> str:
    """What to look for to confirm a candidate: the first sentence of its entry's Symptom section."""
    text = " ".join(entry.section("Symptom").split())
    text = re.sub(r"```\w*", "", text).strip()
    m = re.match(r"(.{20,300}?[.:])(?:\s|$)", text)
    first = (m.group(1) if m else text[:300]).rstrip(":")
    return f"{first} (see {entry.anchor})" if first else f"read {entry.anchor}"
