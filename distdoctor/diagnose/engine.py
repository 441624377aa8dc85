"""Run a diagnosis: stream the inputs, build events, find the first failure, rank the causes."""

from __future__ import annotations

import io
import zlib
from collections import defaultdict

from distdoctor.diagnose.events import AGENT, Event, EventBuilder, Line
from distdoctor.diagnose.first_failure import find_first_failure
from distdoctor.diagnose.matcher import CompiledSignature, Matcher, differs_key, matcher_for
from distdoctor.diagnose.prefixes import parse_timestamp, rank_from_path, split_prefix, strip_ansi
from distdoctor.diagnose.rank_values import RankValues
from distdoctor.diagnose.scanner import Prefilter
from distdoctor.diagnose.sources import InputError, ScanStats, Source, blocks, expand

ECHO_CAUSE = "peer_died_first"
MAX_EVIDENCE = 5
ECHO_BONUS = 8.0
KEYWORD_WEIGHT = 2.0
THIN_SCORE = 4.0


class _Tally:
    """Signature counts and the first few evidence lines per cause, in bounded memory."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = defaultdict(int)
        self.sigs: dict[tuple[str, int], CompiledSignature] = {}
        self.evidence: dict[str, list[dict]] = defaultdict(list)
        self.agent_echoes: dict[tuple[str, int], int] = defaultdict(int)
        self.conditions: set[str] = set()  # `when` / `unless` regexes seen in some line
        self.rank_values: RankValues[Line] = RankValues()

    def add(self, ln: Line, sig: CompiledSignature) -> None:
        k = (sig.cause, sig.index)
        if sig.kind == "echo" and AGENT.search(ln.text):
            # the agent stops the survivors after any failure: weak evidence for one cause
            self.agent_echoes[k] += 1
        else:
            self.counts[k] += 1
        self.sigs[k] = sig
        ev = self.evidence[sig.cause]
        if len(ev) < MAX_EVIDENCE and not any(e["file"] == ln.file and e["line"] == ln.line for e in ev):
            ev.append({"file": ln.file, "line": ln.line, "text": ln.text[:500], "rank": ln.rank,
                       "kind": sig.kind, "proves": sig.proves, "sig": k})


def _scan_source(idx: int, src: Source, pre: Prefilter, matcher: Matcher, builder: EventBuilder,
                 tally: _Tally, stats: ScanStats, progress=None) -> None:
    state: dict = {}
    with src.open() as stream:
        for n, (first, block) in enumerate(blocks(stream, stats, src.name)):
            if progress is not None and n % 64 == 63:
                progress(idx + 1, stats)
            for line_no, raw in pre.lines(first, block, state):
                stats.candidates += 1
                text = raw.decode("utf-8", "replace")
                if "\ufffd" in text:
                    stats.invalid_utf8 = True
                text = strip_ansi(text).rstrip("\r")
                rank, ts, body = split_prefix(text)
                if rank is None:
                    rank = src.rank_hint
                if ts is None:
                    ts = parse_timestamp(body)
                hits = matcher.match_line(text)
                if matcher.conditions:
                    tally.conditions.update(matcher.match_conditions(text))
                ln = Line(idx, src.name, line_no, rank, ts, text, hits, body)
                if matcher.rank_values:
                    for cond, who, value in matcher.match_rank_values(text, rank):
                        tally.rank_values.add(cond, who, value, ln)
                for h in hits:
                    tally.add(ln, h)
                builder.feed(ln, body)


def _add_rank_value_evidence(tally: _Tally, matcher: Matcher, differing: dict) -> None:
    """Where two ranks reported different values, their lines lead the evidence of the causes this enables."""
    for sig in matcher.signatures:
        if sig.differs in differing and (sig.cause, sig.index) in tally.counts:
            ev = tally.evidence[sig.cause]
            (r0, _, v0), (r1, _, v1) = differing[sig.differs]
            proves = f"rank {r0} reports {', '.join(v0)}; rank {r1} reports {', '.join(v1)}"
            lines: list[dict] = []
            for r, ln, _ in differing[sig.differs]:
                same = [e for e in lines + ev if (e["file"], e["line"]) == (ln.file, ln.line)]
                if same:  # both ranks' reports on one (interleaved) line
                    same[0]["rank"] = None if same[0]["kind"] == "ranks differ" else same[0]["rank"]
                    continue
                lines.append({"file": ln.file, "line": ln.line, "text": ln.text[:500], "rank": r,
                              "kind": "ranks differ", "proves": proves})
            ev[:0] = lines


def _score(tally: _Tally) -> dict[str, float]:
    scores: dict[str, float] = defaultdict(float)
    for k, n in tally.counts.items():
        sig = tally.sigs[k]
        if sig.active(tally.conditions):
            scores[sig.cause] += sig.weight * (1 + 0.25 * min(n - 1, 4))
    for k in tally.agent_echoes:
        sig = tally.sigs[k]
        if sig.active(tally.conditions):
            scores[sig.cause] += 0.25 * sig.weight
    return scores


def diagnose_sources(sources, context: str | None = None, references_root=None,
                     errors: list[dict] | None = None, progress=None) -> dict:
    matcher = matcher_for(references_root)
    pre = Prefilter(matcher)
    builder = EventBuilder()
    tally = _Tally()
    stats = ScanStats()
    errors = errors if errors is not None else []
    files = 0
    for idx, src in enumerate(sources):
        files += 1
        try:
            _scan_source(idx, src, pre, matcher, builder, tally, stats, progress)
        except InputError as exc:
            errors.append({"path": src.name, "error": str(exc), "explicit": src.explicit})
        except (OSError, EOFError, zlib.error) as exc:  # unreadable file, bad or truncated .gz, permission denied
            errors.append({"path": src.name, "error": f"{src.name}: cannot read: {exc}", "explicit": src.explicit})
        if progress is not None:
            progress(files, stats)

    differing = tally.rank_values.differing()
    tally.conditions.update(differs_key(c) for c in differing)
    seen = tally.conditions
    if any(s.conditional for s in matcher.signatures):
        builder.keep_hits(lambda h: h.active(seen))  # a signature whose condition failed did not match
    _add_rank_value_evidence(tally, matcher, differing)
    scores = _score(tally)
    found = find_first_failure(builder)
    first, first_line, echoes, alike = found.event, found.line, found.echoes, found.all_ranks
    if first is not None:
        explained = [h for h in first.hits if h.kind in ("root", "hint")]
        for h in {(h.cause, h.index): h for h in first.hits}.values():
            scores[h.cause] += 3 * h.weight if h.kind == "root" else 1.5 * h.weight if h.kind == "hint" else 0
        if explained:
            # the first failure has a cause of its own: the echoes are its consequences
            if ECHO_CAUSE in scores and all(h.cause != ECHO_CAUSE for h in explained):
                scores[ECHO_CAUSE] *= 0.25
        elif any(e.rank != first.rank or e.first.src != first.first.src for e in echoes) \
                and ECHO_CAUSE in matcher.entries:
            scores[ECHO_CAUSE] += ECHO_BONUS
    elif first_line is not None and echoes and ECHO_CAUSE in matcher.entries:
        # only the agent saw the first failure (a kill with no message of its own); the workers' errors are echoes
        scores[ECHO_CAUSE] += ECHO_BONUS

    context_hits: list[dict] = []
    if context:
        for cause, kw, words in matcher.match_keywords(context):
            scores[cause] += KEYWORD_WEIGHT
            context_hits.append({"cause": cause, "keyword": kw, "words": words})
        for i, line in enumerate(context.splitlines(), 1):
            for h in (h for h in matcher.match_line(line) if h.active(seen)):
                scores[h.cause] += h.weight
                tally.evidence[h.cause].append({"file": "<context>", "line": i, "text": line[:500],
                                                "rank": None, "kind": h.kind, "proves": h.proves})

    ranked = sorted(((c, s) for c, s in scores.items() if s > 0 and c in matcher.entries),
                    key=lambda cs: (-cs[1], cs[0]))
    causes = []
    for cause, score in ranked:
        e = matcher.entries[cause]
        evidence = [{k: v for k, v in ev.items() if k != "sig"} for ev in tally.evidence.get(cause, [])
                    if "sig" not in ev or tally.sigs[ev["sig"]].active(seen)]
        if first_line is not None and any(h.cause == cause for h in first_line.hits):
            # the first failure's own line leads the evidence of the cause it shows
            lead = {"file": first_line.file, "line": first_line.line, "text": first_line.text[:500],
                    "rank": first_line.rank, "kind": "first failure",
                    "proves": next(h.proves for h in first_line.hits if h.cause == cause)}
            evidence = [lead] + [e for e in evidence if (e["file"], e["line"]) != (lead["file"], lead["line"])]
        evidence += [{"file": "<context>", "line": None, "text": context or "", "rank": None, "kind": "keyword",
                      "proves": f"the description says {h['words']!r} (/{h['keyword']}/)"} for h in context_hits
                     if h["cause"] == cause][:1]
        causes.append({"id": cause, "score": round(score, 2), "title": e.title, "entry": e.anchor,
                       "patch": e.patch, "evidence": evidence[:MAX_EVIDENCE]})
    top = matcher.entries[causes[0]["id"]] if causes else None
    ff = None
    if first_line is not None:
        ff = {"rank": first_line.rank, "file": first_line.file, "line": first_line.line,
              "text": first_line.text[:500], "ts": _fmt_ts(first_line.ts)}
        if first is None:
            ff["seen_by"] = found.seen_by
        if alike:
            ff["all_ranks"] = True
        if found.waiting:
            ff["waiting"] = True  # every failing rank timed out waiting for another
    echo_list = [{"file": e.key_line().file, "line": e.key_line().line, "rank": e.rank,
                  "text": e.key_line().text[:300]} for e in echoes[:20]]
    thin = not causes or causes[0]["score"] < THIN_SCORE or first is None
    result = {
        "causes": causes,
        "first_failure": ff,
        "patch": top.patch if top else None,
        "entry": top.anchor if top else None,
        "fix": _first_paragraph(top.section("Fix")) if top else None,
        "verify": top.verify if top else None,
        "echoes": echo_list,
        "next_step": _next_step(causes, first, first_line is None and not echoes and stats.lines > 0) if thin else None,
        "errors": [{"path": e["path"], "error": e["error"]} for e in errors],
        "stats": {"files": files, "bytes": stats.bytes, "lines": stats.lines, "candidates": stats.candidates,
                  "cut_lines": stats.cut_lines, "invalid_utf8": stats.invalid_utf8, "engine": pre.engine,
                  "events": len(builder.events), "events_dropped": builder.dropped},
    }
    return result


def _fmt_ts(ts: tuple | None) -> str | None:
    if ts is None:
        return None
    y, mo, d, h, mi, s, f = ts
    return (f"{y:04d}-" if y else "") + f"{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s + f:06.3f}"


def _first_paragraph(text: str) -> str:
    """The Fix section's first paragraph, with the block it introduces when it ends with a colon."""
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    out = paras[:1]
    while out and out[-1].endswith(":") and len(out) < min(len(paras), 3):
        out.append(paras[len(out)])
    return "\n\n".join(out)


def _next_step(causes: list[dict], first: Event | None, quiet_log: bool = False) -> str:
    if causes and quiet_log:
        return ("No rank logged an error in these logs. If the job hangs, dump every rank's stack (python "
                "scripts/dump_stacks.py). If it finished, check that the ranks really train together: run "
                "scripts/probe.py under the same launch line (every rank must report its own rank, the expected "
                "world size and an all_reduce that adds up), then have the program itself print, on every rank after "
                "its set-up, torch.distributed.is_initialized() and get_world_size(), and a checksum of the "
                "parameters after a few steps: False, 1, or checksums that differ mean each rank trains alone.")
    if not causes:
        return ("No known signature matched. Re-run with per-rank logs (torchrun --log-dir DIR --tee 3), "
                "TORCH_DISTRIBUTED_DEBUG=INFO and NCCL_DEBUG=INFO, and a short init_process_group timeout; "
                "if it hangs, dump every rank's stack (py-spy dump --pid PID) and diagnose those logs.")
    if first is None:
        return ("No rank's own error is in these logs: collect every rank's output (torchrun --log-dir DIR "
                "--tee 3, or srun --label), then diagnose the folder; for a hang, dump all ranks' stacks with "
                "py-spy and add dist.monitored_barrier around the suspected step.")
    return ("The evidence is thin: re-run with TORCH_DISTRIBUTED_DEBUG=INFO and NCCL_DEBUG=INFO on every rank "
            "and diagnose the new logs together with these.")


def diagnose_paths(paths: list[str], context: str | None = None, references_root=None, progress=None) -> dict:
    """Diagnose log files, folders of per-rank logs, '-' (stdin), plain or .gz."""
    errors: list[dict] = []
    result = diagnose_sources(expand([str(p) for p in paths], errors), context, references_root, errors, progress)
    result["input_error"] = any(e.get("explicit", True) for e in errors)
    return result


def diagnose_text(text: str, context: str | None = None, name: str = "<text>", references_root=None,
                  files: dict[str, str] | None = None) -> dict:
    """Diagnose a log given as a string (may be empty when only `context` is known), with optional per-rank
    files given as {relative path: text} (the rank comes from the path, as for a folder on disk)."""
    sources = [_text_source(name, text, None)]
    for rel, body in sorted((files or {}).items()):
        sources.append(_text_source(rel, body, rank_from_path(rel)))
    return diagnose_sources(sources, context, references_root)


def _text_source(name: str, text: str, rank: int | None) -> Source:
    data = (text or "").encode("utf-8", "replace")
    return Source(name, lambda: io.BytesIO(data), rank)
