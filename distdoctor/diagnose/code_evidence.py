"""Evidence beyond the log: the static checker's findings on the job's code (`diagnose LOG --repo PATH`).

A hang or timeout log shows the symptom (collective_timeout, peer_died_first); the code often shows the cause
(a collective under `if rank == 0`, every rank saving one file). Each finding (rule code, cause, file:line, the
line's text) is evidence of level `code` for its cause, weighed against the log's answer by one rule:

0. The code must be the job's: when the log names Python files of its own (traceback frames, torchrun's
   `x.py FAILED`; installed packages aside) and none of them is a file of --repo (same trailing path), the
   findings are all `unrelated` and nothing is weighed.
1. Consistent causes: the log's ranked causes (top, alternatives, candidates) and the usual roots
   (taxonomy `often_behind`) of its symptom causes (the top's when it is confident; every candidate's when not).
   A finding of any other cause is `unrelated`: reported in its own section, never ranked.
2. Displaceable answer: no cause at all, only candidates, or a confident top that is a symptom cause (it has
   `often_behind`) while the log shows no own error of the first failing rank (its first failure is a
   timeout, or a kill the launcher or the peers report). A symptom top beside the failing rank's own error
   message keeps its place: that message, not a pattern elsewhere in the code, is what the log shows failing.
3. On a displaceable answer, the consistent cause with a finding takes the top (the log's own order first,
   then the `often_behind` order), with its findings as its first evidence lines (file:line, rule); the answer
   becomes confident (the log shows the symptom, the code the mechanism), the old top its first alternative.
   With no cause from the log at all, the findings' causes become candidates (level `code`), not an answer.
4. Otherwise a finding of the top cause is more evidence of it (`evidence`); one of another consistent cause is
   listed as `also` (and added to that cause's evidence where the log ranks it): a confident non-symptom
   signature is never displaced.
5. A promoted cause offers its patch only when the patch's precondition (preconditions.py) holds on the log
   (as the engine decided) or on the finding's own code line; otherwise the patch is withheld with the reason.
No weight is tuned per rule or per cause.
"""

from __future__ import annotations

import hashlib
import json
import linecache
import os
import re
import sys
from typing import Callable, Iterable

from distdoctor.cache import cache_dir, write_atomic
from distdoctor.diagnose import calibrate, preconditions

MAX_CODE_EVIDENCE = 3  # code lines added to one cause
NAMED = re.compile(rb'File "([^"<>]+\.py)", line \d+|(\S+\.py) FAILED')
LIBRARY = ("site-packages", "dist-packages", "lib/python3")
MAX_NAMED = 4096  # distinct files kept of those the log names (a log names a few, many times)


class RepoError(ValueError):
    """A --repo PATH that is neither a folder nor a .py file."""


def validate(paths: Iterable[str]) -> list[str]:
    """The paths as given; RepoError (one line) for one that is not a folder or a readable .py file."""
    out = []
    for p in paths:
        if not (os.path.isdir(p) or (p.endswith(".py") and os.path.isfile(p))):
            raise RepoError(f"--repo {p}: not a folder or a .py file")
        out.append(p)
    return out


def check(paths: list[str], quiet: bool = True, cache: bool = True) -> dict:
    """Run the static checker over the paths (one repository per path: its call graph spans the path; nothing is
    imported). Returns {"paths", "files", "errors", "findings": [dict], "relpaths"}. Progress on stderr unless
    quiet. link.py's per-file cache does not fit (a finding may need the whole repository's call graph): the
    answer is cached per set of paths, keyed by every file's path, size and mtime and the checker's code."""
    from distdoctor.check.link import _checker_stamp
    from distdoctor.patching.engine import iter_python_files

    files = [(p, f) for p in paths for f, err in iter_python_files(p) if not err]
    stamp = []
    for _, f in files:
        try:
            st = os.stat(f)
            stamp.append((os.path.abspath(f), st.st_size, st.st_mtime_ns))
        except OSError:
            stamp.append((os.path.abspath(f), None, None))
    key = hashlib.sha256(repr([os.getcwd(), list(paths), stamp, _checker_stamp()]).encode()).hexdigest()
    cached = cache_dir("check-repos") / (key[:32] + ".json")
    try:
        if cache:
            return json.loads(cached.read_text())
    except (OSError, ValueError):
        pass
    from distdoctor.check.engine import check_paths  # libcst: only with --repo, on a cache miss

    def progress(done: int, total: int) -> None:
        if total >= 50 and (done == total or done % 100 == 0):
            print(f"diagnose: checking the code, {done}/{total} files", file=sys.stderr, flush=True)

    report = check_paths(paths, progress=None if quiet else progress)
    findings = [{"path": f.path, "line": f.line, "col": f.col, "code": f.code, "cause": f.cause,
                 "message": f.message, "text": linecache.getline(f.path, f.line).strip()[:300]}
                for f in report.findings]
    rel = {os.path.basename(f) if os.path.isfile(p) else os.path.relpath(f, p) for p, f in files}
    out = {"paths": list(paths), "files": report.files, "errors": [f"{p}: {r}" for p, r in report.errors],
           "findings": findings, "relpaths": sorted(rel)}
    write_atomic(cached, json.dumps(out).encode())
    return out


def add_named(line: bytes, out: set[str]) -> None:
    """Add the job's own Python files one log line names (a traceback frame, torchrun's `x.py FAILED`; installed
    packages aside) to `out`, up to MAX_NAMED files. The scan calls it on each candidate line it reads."""
    for m in NAMED.finditer(line):
        name = (m.group(1) or m.group(2)).decode("utf-8", "replace")
        if len(out) < MAX_NAMED and not any(lib in name for lib in LIBRARY):
            out.add(name)


def ran(named: set[str], relpaths: Iterable[str]) -> bool:
    """Whether the code is the job's: the log names none of its own files, or one of --repo's (trailing path)."""
    if not named:
        return True
    tails = {tuple(r.replace(os.sep, "/").split("/")) for r in relpaths}
    for n in named:
        parts = tuple(n.replace("\\", "/").split("/"))
        if any(parts[-len(t):] == t for t in tails):
            return True
    return False


def _item(f: dict) -> dict:
    """A finding as an evidence line of level `code`."""
    return {"file": f["path"], "line": f["line"], "text": f["text"], "rank": None, "kind": "code",
            "proves": f"the checker's {f['code']}: {f['message']}", "level": "code"}


def _new_cause(cause: str, entries: dict, role: str) -> dict:
    e = entries[cause]
    return {"id": cause, "score": 0.0, "level": "code", "title": e.title, "entry": e.anchor, "patch": e.patch,
            "patch_ready": False, "patch_note": None, "check": calibrate.check_for(e), "evidence": [], "role": role}


def _gate_patch(c: dict, found: list[dict]) -> None:
    """A promoted cause's patch: ready when the log showed its precondition, or when a finding's line does."""
    if not c.get("patch") or c.get("patch_ready"):
        return
    shown = {c["patch"]: {"file": f["path"], "line": f["line"], "text": f["text"]}
             for f in found if c["patch"] in preconditions.met_in(f["text"])}
    c.update(calibrate.patch_gate(c["patch"], shown))


def consistent(causes: list[dict], verdict: str, roots: Callable[[str], tuple[str, ...]]) -> list[str]:
    """The causes a finding may support, in order: the log's ranked causes, then their symptoms' usual roots."""
    out = [c["id"] for c in causes]
    symptoms = causes[:1] if verdict == "confident" else causes
    for c in symptoms:
        out += [r for r in roots(c["id"]) if r not in out]
    return out


def weigh(causes: list[dict], verdict: str, code: dict, own_error: bool, entries: dict,
          roots: Callable[[str], tuple[str, ...]], named: set[str] = frozenset()) -> tuple[list[dict], str, dict]:
    """Apply the module's rule: (causes with code evidence and roles, verdict, the `code` section). `named`: the
    Python files the log names (add_named, collected by the log's one scan)."""
    findings = [f for f in code["findings"] if f["cause"] in entries]
    if not ran(named, code.get("relpaths", ())):
        shown = ", ".join(sorted(named)[:3])
        return causes, verdict, {
            "paths": code["paths"], "files": code["files"], "errors": code["errors"],
            "findings": [{k: v for k, v in f.items()} | {"role": "unrelated"} for f in findings],
            "promoted": None, "over": None,
            "rule": f"the log names none of --repo's files ({shown}): not the code that ran, not weighed"}
    order = consistent(causes, verdict, roots)
    by_cause: dict[str, list[dict]] = {}
    for f in findings:
        by_cause.setdefault(f["cause"], []).append(f)
    causes = [dict(c, evidence=list(c["evidence"])) for c in causes]
    listed = {c["id"]: c for c in causes}
    top = causes[0]["id"] if causes else None
    displaceable = verdict != "confident" or (bool(roots(top)) and not own_error)
    supported = [c for c in order if c in by_cause]
    promoted = None
    rule = "no finding"
    if not causes and by_cause:
        rule = "no cause in the log: the findings' causes are candidates"
        causes = [_new_cause(c, entries, "candidate") for c in by_cause]
        listed = {c["id"]: c for c in causes}
        verdict = "candidates"
    elif displaceable and supported:
        promoted = supported[0]
        was = "only candidates" if verdict != "confident" else f"a symptom ({top})"
        rule = f"the log's answer was {was}: the code's {promoted} takes the top"
        winner = listed.get(promoted) or _new_cause(promoted, entries, "top")
        causes = [winner] + [c for c in causes if c["id"] != promoted]
        listed[promoted] = winner
        winner["level"] = "code" if winner["level"] not in calibrate.CONFIDENT else winner["level"]
        winner["evidence"] = [_item(f) for f in by_cause[promoted][:MAX_CODE_EVIDENCE]] + winner["evidence"]
        _gate_patch(winner, by_cause[promoted])
        verdict = "confident"
        for i, c in enumerate(causes):
            c["role"] = "top" if i == 0 else "alternative"
    elif by_cause:
        rule = "the log's top stands (a confident cause the code cannot displace)" if verdict == "confident" \
            else "no finding of a cause consistent with the log"
    out = []
    for f in findings:
        c = f["cause"]
        role = "top" if c == promoted else "evidence" if c == (causes[0]["id"] if causes else None) \
            else "also" if c in order else "unrelated"
        if role == "unrelated" and c in listed:  # a candidate made from the findings alone
            role = "evidence"
        if role in ("evidence", "also") and c in listed and c != promoted:
            ev = listed[c]["evidence"]
            if sum(e["kind"] == "code" for e in ev) < MAX_CODE_EVIDENCE:
                ev.append(_item(f))
        out.append({**f, "role": role})
    section = {"paths": code["paths"], "files": code["files"], "errors": code["errors"], "findings": out,
               "promoted": promoted, "over": top if promoted and promoted != top else None, "rule": rule}
    return causes, verdict, section
