"""The hang report: JSON (`ranks`, `odd_ranks`, `causes`, `location` and more) and the table a person reads."""

from __future__ import annotations

from distdoctor.hang.align import Verdict
from distdoctor.hang.frames import short
from distdoctor.hang.model import HostSnapshot
from distdoctor.knowledge import entry_links


def _entry(cause: str) -> str | None:
    return entry_links().get(cause)


def to_json(snap: HostSnapshot, v: Verdict) -> dict:
    ranks = []
    for r in snap.ranks:
        d = r.to_json()
        d["path"] = [f"{f.file}:{f.line} {f.function}" for f in r.path]
        d.pop("frames")
        ranks.append(d)
    return {"ranks": ranks, "odd_ranks": v.odd_ranks,
            "causes": [{"id": c.id, "score": c.score, "evidence": c.evidence, "entry": _entry(c.id)}
                       for c in v.causes],
            "location": {"file": v.location["file"], "line": v.location["line"], "code": v.location["code"],
                         "why": v.location["why"]} if v.location else None,
            "verdict": v.summary, "groups": v.groups, "flight_recorder": v.flight_recorder, "checker": v.checker,
            "missing_ranks": [r for r in v.odd_ranks if r not in {x.rank for x in snap.ranks}],
            "hosts": sorted({r.host for r in snap.ranks}), "errors": snap.errors, "seconds": round(snap.seconds, 3)}


def render(snap: HostSnapshot, v: Verdict) -> str:
    rows = [("", "rank", "local", "host", "pid", "state", "op", "where (innermost user frame)")]
    for r in snap.ranks:
        where = f"{short(r.file)}:{r.line} {r.function}" if r.file else (r.error or "-")
        rows.append(("!" if r.rank in v.odd_ranks else "", str(r.rank), str(r.local_rank), r.host, str(r.pid),
                     r.state, r.op or "-", where))
    for g in v.odd_ranks:
        if g not in {r.rank for r in snap.ranks}:
            if g in snap.expected_ranks:
                rows.append(("!", str(g), "-", "-", "-", "exited", "-", "no process: the launcher started it"))
            else:
                rows.append(("!", str(g), "-", "-", "-", "absent", "-", "no process on the host(s) examined"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in rows]
    lines.append("")
    if not v.causes:
        lines.append(f"VERDICT: {v.summary}")
    else:
        lines.append(f"VERDICT: {v.summary}; odd rank(s): {', '.join(map(str, v.odd_ranks)) or '-'}")
        if v.location:
            lines.append(f"LOCATION: {short(v.location['file'])}:{v.location['line']}: {v.location['code']}"
                         f"  ({v.location['why']})")
        for i, c in enumerate(v.causes):
            lines.append(f"{'CAUSE' if i == 0 else 'also'}: {c.id} (score {c.score:.2f})  fix: {_entry(c.id) or '-'}")
            if i == 0:
                lines += [f"  - {e}" for e in c.evidence]
        for f in v.checker:
            lines.append(f"CHECKER: {short(f['path'])}:{f['line']}:{f['col']}: {f['code']} {f['message']}  "
                         f"(caught before launch by `check_repo.py`)")
    for e in snap.errors:
        lines.append(f"note: {e}")
    return "\n".join(lines)
