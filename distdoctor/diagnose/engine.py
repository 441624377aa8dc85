"""Run a diagnosis: stream the inputs, build events, find the first failure, rank the causes."""

from __future__ import annotations

import io
import math
from collections import defaultdict
from pathlib import Path

import re

from distdoctor.diagnose.events import DEAD_PEER, Event, EventBuilder, Line
from distdoctor.diagnose.matcher import CompiledSignature, Matcher, matcher_for
from distdoctor.diagnose.prefixes import parse_timestamp, split_prefix, strip_ansi
from distdoctor.diagnose.scanner import Prefilter
from distdoctor.diagnose.sources import InputError, ScanStats, Source, blocks, expand

ECHO_CAUSE = "peer_died_first"
MAX_EVIDENCE = 5
FIRST_FAILURE_BONUS = 12.0
ECHO_BONUS = 8.0
KEYWORD_WEIGHT = 2.0
THIN_SCORE = 4.0


class _Tally:
    """Signature counts and the first few evidence lines per cause, in bounded memory."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = defaultdict(int)
        self.sigs: dict[tuple[str, int], CompiledSignature] = {}
        self.evidence: dict[str, list[dict]] = defaultdict(list)

    def add(self, ln: Line, sig: CompiledSignature) -> None:
        k = (sig.cause, sig.index)
        self.counts[k] += 1
        self.sigs[k] = sig
        ev = self.evidence[sig.cause]
        if len(ev) < MAX_EVIDENCE and not any(e["file"] == ln.file and e["line"] == ln.line for e in ev):
            ev.append({"file": ln.file, "line": ln.line, "text": ln.text[:500], "rank": ln.rank,
                       "kind": sig.kind, "proves": sig.proves})


def _scan_source(idx: int, src: Source, pre: Prefilter, matcher: Matcher, builder: EventBuilder,
                 tally: _Tally, stats: ScanStats) -> None:
    state: dict = {}
    with src.open() as stream:
        for first, block in blocks(stream, stats, src.name):
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
                ln = Line(idx, src.name, line_no, rank, ts, text, hits, body)
                for h in hits:
                    tally.add(ln, h)
                builder.feed(ln, body)


def _score(tally: _Tally) -> dict[str, float]:
    scores: dict[str, float] = defaultdict(float)
    for k, n in tally.counts.items():
        sig = tally.sigs[k]
        scores[sig.cause] += sig.weight * (1 + 0.25 * min(n - 1, 4))
    return scores


def _order(ev: Event, all_ts: bool) -> tuple:
    return (ev.ts, ev.first.src, ev.first.line) if all_ts else (ev.first.src, ev.first.line)


def _blur(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+|\d+", "N", text.strip())[:300]


def _signature(ev: Event):
    """What failed, comparable across ranks: the signatures matched, else the blurred failure text."""
    hits = frozenset((h.cause, h.index) for h in ev.hits if h.kind != "echo")
    return hits or _blur(ev.key_line().body)


def _first_failure(builder: EventBuilder) -> tuple[Event | None, Line | None, list[Event], bool]:
    """(first failing event or None, the line naming the first failure, echo events, every rank alike)."""
    errors = [e for e in builder.events if e.is_error and not e.is_agent]
    echoes = [e for e in errors if e.is_echo]
    candidates = [e for e in errors if not e.is_echo]
    agent = builder.agent_first()
    if candidates:
        all_ts = all(e.ts is not None for e in candidates) and len({e.first.src for e in candidates}) > 1
        candidates.sort(key=lambda e: _order(e, all_ts))
        first = candidates[0]
        key = first.key_line()
        # The same failure on several ranks (or several unlabelled copies): no rank went first.
        sig = _signature(first)
        if first.rank is not None:
            per_rank: dict = {}
            for e in candidates:
                per_rank.setdefault((e.first.src, e.rank), e)
            alike = sum(1 for e in per_rank.values() if _signature(e) == sig) >= 2
        else:  # unlabelled lines: copies of the same failure from several processes
            text = _blur(key.body)
            alike = sum(1 for e in candidates if e.rank is None for ln in e.lines if _blur(ln.body) == text) >= 2
        if first.rank is None and not alike and agent is not None:
            key = Line(key.src, key.file, key.line, agent.rank, key.ts, key.text, key.hits, key.body)
        if alike:
            key = Line(key.src, key.file, key.line, None, key.ts, key.text, key.hits, key.body)
        return first, key, echoes, alike
    killed = [e.exitcode for e in builder.summary if e.exitcode is not None and e.exitcode < 0 and e.exitcode != -15]
    if agent is not None and len(killed) >= 2 and len(set(killed)) == 1:
        # every rank the agent lists died of the same signal: none went first
        return None, Line(agent.src, agent.file, agent.line, None, agent.ts, agent.text, agent.hits,
                          agent.body), echoes, True
    if agent is None:
        # NCCL's "Connection closed by localRank N" names the rank that went away
        for e in builder.events:
            for ln in e.lines:
                m = DEAD_PEER.search(ln.body)
                if m:
                    return None, Line(ln.src, ln.file, ln.line, int(m["rank"]), ln.ts, ln.text, ln.hits,
                                      ln.body), echoes, False
    return None, agent, echoes, False


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
            _scan_source(idx, src, pre, matcher, builder, tally, stats)
        except InputError as exc:
            errors.append({"path": src.name, "error": str(exc), "explicit": src.explicit})
        except (OSError, EOFError) as exc:  # unreadable file, truncated .gz, permission denied
            errors.append({"path": src.name, "error": f"{src.name}: cannot read: {exc}", "explicit": src.explicit})
        if progress is not None:
            progress(files, stats)

    scores = _score(tally)
    first, first_line, echoes, alike = _first_failure(builder)
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
        for cause, kw in matcher.match_keywords(context):
            scores[cause] += KEYWORD_WEIGHT
            context_hits.append({"cause": cause, "keyword": kw})
        for i, line in enumerate(context.splitlines(), 1):
            for h in matcher.match_line(line):
                scores[h.cause] += h.weight
                tally.evidence[h.cause].append({"file": "<context>", "line": i, "text": line[:500],
                                                "rank": None, "kind": h.kind, "proves": h.proves})

    ranked = sorted(((c, s) for c, s in scores.items() if s > 0 and c in matcher.entries),
                    key=lambda cs: (-cs[1], cs[0]))
    causes = []
    for cause, score in ranked:
        e = matcher.entries[cause]
        evidence = list(tally.evidence.get(cause, []))
        evidence += [{"file": "<context>", "line": None, "text": context or "", "rank": None, "kind": "keyword",
                      "proves": f"the description matches /{h['keyword']}/"} for h in context_hits
                     if h["cause"] == cause][:1]
        causes.append({"id": cause, "score": round(score, 2), "title": e.title, "entry": e.anchor,
                       "patch": e.patch, "evidence": evidence[:MAX_EVIDENCE]})
    top = matcher.entries[causes[0]["id"]] if causes else None
    ff = None
    if first_line is not None:
        ff = {"rank": first_line.rank, "file": first_line.file, "line": first_line.line,
              "text": first_line.text[:500], "ts": _fmt_ts(first_line.ts)}
        if first is None:
            ff["seen_by"] = "agent" if first_line is builder.agent_first() else "peers"
        if alike:
            ff["all_ranks"] = True
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
        "next_step": _next_step(causes, first) if thin else None,
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
    paras = [p.strip() for p in text.split("\n\n") if p.strip()]
    return paras[0] if paras else ""


def _next_step(causes: list[dict], first: Event | None) -> str:
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


def diagnose_text(text: str, context: str | None = None, name: str = "<text>", references_root=None) -> dict:
    """Diagnose a log given as a string (may be empty when only `context` is known)."""
    data = (text or "").encode("utf-8", "replace")
    src = Source(name, lambda: io.BytesIO(data), None)
    return diagnose_sources([src], context, references_root)
