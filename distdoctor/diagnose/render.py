"""The report for people: top cause, first failing rank with its evidence, fix, patch, entry."""

from __future__ import annotations

import textwrap


def _where(e: dict) -> str:
    rank = f" [rank {e['rank']}]" if e.get("rank") is not None else ""
    line = f":{e['line']}" if e.get("line") is not None else ""
    return f"{e['file']}{line}{rank}"


def _clip(text: str, n: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= n else text[:n - 1] + "…"


LEVEL_WORDS = {
    "signature": "an error signature on a line of the log",
    "structural": "the structure of the failure (exception type, message template, ranks)",
    "symptom": "a line of the log that several causes print",
    "code": "a finding of the static checker in the code (--repo)",
    "similar": "a similar known log only",
    "words": "your description only",
    "context": "a line that only says how the job was launched",
    "typical": "what usually lies behind the top cause (not read in the logs)",
}


def track_line(rec: dict | None) -> str | None:
    """How often an answer like this one has been right (knowledge.track_record), in one line."""
    if not rec:
        return None
    others = ", ".join(f"{o['id']} {o['n']}" for o in rec["instead"])
    kind = "this top cause" if rec["verdict"] == "confident" else f"{rec['cause']} as the first candidate"
    return (f"Track record: {rec['right']} of {rec['answered']} real logs answered with {kind} had it as their cause "
            f"(train corpus, each repository left out)" + (f"; the others: {others}" if others else ""))


def _candidates(out: list[str], causes: list[dict], has_failure: bool, rec: dict | None = None) -> None:
    """Causes that rest on retrieval or words only: to confirm, never a top cause with a fix."""
    out.append("")
    why = "no signature or known failure structure in the logs names a cause" if has_failure \
        else "the logs show no failure of their own"
    if causes and causes[0].get("level") == "symptom":
        why = "the logs' lines are ones several causes print; none names one"
    out.append(f"No confident cause ({why}). Candidates to confirm:")
    if line := track_line(rec):
        out.append(f"  ({line})")
    for c in causes[:5]:
        out.append(f"  - {c['id']} — {c['title']}  (rests on: {LEVEL_WORDS[c.get('level', 'words')]})")
        for e in c["evidence"][:2]:
            out.append(f"      {_where(e)}: {_clip(e['proves'], 150)}")
        out.append(f"      check: {_clip(c.get('check') or c['entry'], 220)}")
    out.append("No fix or patch is proposed until one of these is confirmed by the logs.")


ALSO_SHOWN = 2  # alternatives shown with their evidence and what to check; the rest by name


def _also_consider(out: list[str], others: list[dict]) -> None:
    """The causes after a confident top cause: what else the evidence supports, each with what it rests on and
    what to check; no fix or patch is proposed for them."""
    if not others:
        return
    out.append("Also consider (no fix proposed: confirm one in the logs first):")
    for c in others[:ALSO_SHOWN]:
        level = c.get("level", "words")
        score = "" if level == "typical" else f"score {c['score']}; "  # a typical root is not scored: nothing read
        out.append(f"  - {c['id']} — {c['title']}  ({score}rests on: {LEVEL_WORDS[level]})")
        for e in c["evidence"][:1]:
            out.append(f"      {_where(e)}: {_clip(e['proves'], 150)}")
        out.append(f"      check: {_clip(c.get('check') or c['entry'], 220)}")
    if others[ALSO_SHOWN:]:
        out.append("  weaker: " + ", ".join(f"{c['id']} ({c['score']}, {c.get('level', '?')})"
                                             for c in others[ALSO_SHOWN:ALSO_SHOWN + 4]))


CODE_ROLES = (("top", "the top cause's mechanism"), ("evidence", "supports the log's answer"),
              ("also", "also in the code (consistent with the log; not ranked above its cause)"),
              ("unrelated", "not related to what the log shows (not ranked)"))


def _code(out: list[str], code: dict | None) -> None:
    """The --repo section: the checker's findings, grouped by what they did to the answer."""
    if code is None:
        return
    found = code["findings"]
    out.append("")
    out.append(f"Code (--repo {', '.join(code['paths'])}): {code['files']} file(s) checked, {len(found)} finding(s)"
               + (f"; {code['rule']}" if found else ""))
    for role, words in CODE_ROLES:
        shown = [f for f in found if f["role"] == role]
        if shown:
            out.append(f"  {words}:")
            for f in shown[:8]:
                out.append(f"    {f['path']}:{f['line']}: {f['code']} [{f['cause']}] {_clip(f['message'], 150)}")
            if len(shown) > 8:
                out.append(f"    ... and {len(shown) - 8} more")


def render(result: dict) -> str:
    out: list[str] = []
    st = result.get("stats", {})
    out.append(f"distdoctor: read {st.get('files', 0)} input(s), {st.get('lines', 0)} lines, "
               f"{st.get('bytes', 0) / 1e6:.1f} MB")
    for err in result.get("errors", []):
        out.append(f"  could not read: {err['error']}")
    causes = result["causes"]
    ff = result.get("first_failure")
    if ff:
        if ff.get("waiting") and ff.get("rank") is not None and ff.get("seen_by") == "peers":
            who = f"rank {ff['rank']}: every other rank timed out waiting for it (first report)"
        elif ff.get("waiting"):
            who = "no rank failed first; the failing ranks timed out waiting for another (first report)"
        elif ff.get("all_ranks"):
            who = "every rank fails the same way"
        elif ff.get("rank") is not None:
            who = f"rank {ff['rank']}"
        else:
            who = "rank unknown"
        seen = {"agent": " (as reported by the launcher: torchrun's summary, srun, mpirun, spawn or Composer)",
                "peers": " (named by its peers' errors)"}.get(ff.get("seen_by", ""), "") if not ff.get("waiting") else ""
        out.append(f"First failure: {who}{seen} at {ff['file']}:{ff['line']}")
        out.append(f"    {_clip(ff['text'])}")
        if ff.get("because"):
            out.append(f"    {ff['because']}")
        if len(ff.get("failed_ranks", [])) > 1:
            out.append(f"    ranks with an error of their own: {', '.join(map(str, ff['failed_ranks']))}")
        if ff.get("missing_ranks") and not ff.get("because"):
            waited = ", ".join(map(str, ff.get("timed_out_ranks", [])))
            missing = ", ".join(map(str, ff["missing_ranks"]))
            out.append(f"    ranks {waited} timed out; rank(s) {missing} reported no timeout in these logs: if the "
                       "logs are complete, the ones they waited for (hung, slow, or died silently): look there first")
    else:
        out.append("First failure: none found (no error event in the logs)")
    echoes = result.get("echoes") or []
    if echoes and ff and ff.get("waiting"):
        out.append(f"Also: {len(echoes)} more timeout or watchdog report(s) from waiting ranks.")
    elif echoes and ff:
        ranks = sorted({e["rank"] for e in echoes if e["rank"] is not None})
        out.append(f"Echoes: {len(echoes)} error(s){' on ranks ' + ', '.join(map(str, ranks)) if ranks else ''} "
                   "are consequences of the first failure (peer closed/reset, SIGTERM, watchdog), not causes.")
    if not causes:
        out.append("Cause: none of the knowledge base's signatures matched, and no known failure is like these logs.")
    elif result.get("verdict", "confident") != "confident":
        _candidates(out, causes, bool(ff), result.get("track_record"))
    else:
        top = causes[0]
        out.append("")
        level = top.get("level", "signature")
        score = f"score {top['score']}; " if top["score"] or level != "code" else ""  # code alone: no log score
        out.append(f"Top cause: {top['id']} — {top['title']}  ({score}rests on: {LEVEL_WORDS[level]})")
        code = result.get("code") or {}
        if line := track_line(result.get("track_record")):
            out.append(f"  {line}")
        if code.get("over"):
            out.append(f"  (the log shows {code['over']}, a symptom or candidates only; the code shows this mechanism)")
        if not ff:
            out.append("  (no failing line was found: this cause rests on the lines below, which are not an error "
                       "of their own; confirm them before applying the fix)")
        for e in top["evidence"]:
            out.append(f"  {_where(e)}: {_clip(e['text'], 160)}")
            out.append(f"      ({e['kind']}, {e.get('level', 'signature')}: {e['proves']})")
        if result.get("fix"):
            out.append("Fix:")
            for para in result["fix"].split("\n\n"):
                if para.startswith("```"):
                    out.extend("    " + ln for ln in para.splitlines() if not ln.startswith("```"))
                else:
                    out.extend("  " + ln for ln in textwrap.wrap(para, 96))
        if result.get("patch"):
            out.append(f"Patch: python scripts/patch_backend.py --dry-run --only {result['patch']} REPO   (then without --dry-run)")
            if top.get("patch_note"):
                out.append(f"  (precondition: {top['patch_note']})")
        elif result.get("patch_withheld"):
            out.append(f"Patch: {top['patch']} withheld: {result['patch_withheld']}")
        else:
            out.append("Patch: none; the fix is guidance (read the entry)")
        out.append(f"Read: {result['entry']}")
        if result.get("verify"):
            out.append(f"Verify: {result['verify']}")
        _also_consider(out, causes[1:])
    _code(out, result.get("code"))
    for f in result.get("checker") or []:
        out.append(f"Checker: {f['path']}:{f['line']}:{f['col']}: {f['code']} {f['message']} "
                   f"[{f['cause']}] (found in the failing traceback's code; `check_repo.py` catches it before launch)")
    if result.get("next_step"):
        out.append("")
        out.append("Next step: " + result["next_step"])
    return "\n".join(out) + "\n"
