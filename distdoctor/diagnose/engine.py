"""Run a diagnosis: stream the inputs, build events, find the first failure, rank the causes."""

from __future__ import annotations

import io
import lzma
import re
import zlib
from collections import defaultdict
from dataclasses import replace

from distdoctor.diagnose import (alternatives, calibrate, code_evidence, env_report, gpu_processes, json_lines,
                                 p2p_matrix, preconditions, store_wait, structure, versions)
from distdoctor.diagnose.events import AGENT, ERRORISH, EXC_LINE, FRAME, Event, EventBuilder, Line
from distdoctor.diagnose.first_failure import blame_awaited, find_first_failure
from distdoctor.diagnose.matcher import CompiledSignature, Matcher, differs_key, matcher_for
from distdoctor.diagnose.prefixes import (NcclRanks, common_indent, message_rank, parse_timestamp, peel_prefix,
                                           rank_from_path, split_prefix, strip_ansi, torch_rank, torchrun_folder)
from distdoctor.diagnose.rank_values import RankValues
from distdoctor.diagnose.scanner import Prefilter
from distdoctor.diagnose.sources import InputError, ScanStats, Source, expand, spans
from distdoctor.knowledge import track_record

ECHO_CAUSE = "peer_died_first"
MAX_EVIDENCE = 5
ECHO_BONUS = 8.0
KEYWORD_WEIGHT = 2.0       # a keyword of the person's words; half that when the first failure has a cause of its own
PROSE_WEIGHT = 1.0       # a keyword in a short log that holds no error line (someone's account, not the job's output)
PROSE_LINES = 20
# beside a log, a setting keyword (`level: context`: a flag, a variable, an option every distributed job may show)
# breaks ties and adds a candidate, never outranks the log's own evidence or its best neighbour
# (a keyword's half, under the 1.5 of the log's best neighbour, SIMILAR_WEIGHT), once per cause
SETTING_WEIGHT = 1.0
# a line the job printed about its own set-up (a glog INFO / WARNING record, an option of ProcessGroupNCCL's dump):
# its words are banners and settings ("NCCL watchdog thread started!", "TIMEOUT(ms): 5000"), not an account
JOB_RECORD = re.compile(r"^[IW]\d{4} \d\d:\d\d:\d\d|^[A-Z][A-Z0-9_]*(?:\(\w+\))?: \S+$")
THIN_SCORE = 4.0
# the agent saw a rank die of a signal (torchrun's summary; srun's report of a task, not its own "Terminated")
KILLED = re.compile(r"exitcode\s*:?\s*-(?!15\b)\d+|Signal (?!15\b)\d+ \(SIG|"
                    r"^srun: error: \S+: tasks? [\d,-]+: (?:Killed|Segmentation fault|Aborted|Bus error)\s*$|"
                    # Open MPI's mpirun: "... exited on signal 9 (Killed)."
                    r"\bexited on signal (?!15\b)\d+ \(")
SYMPTOM_CAUSES = ("collective_timeout", "peer_died_first")  # their keywords describe what any cause looks like
VERSION_WEIGHT = 5.0     # a driver older than the build's CUDA, read from version lines
STRUCTURAL_WEIGHT = 4.0  # a known failure's template (scaled by the overlap), on the first failure
SIMILAR_WEIGHT = 1.5     # the cause with the most BM25 neighbours' votes (cross-validated: retrieval_cv)
HEAD_BYTES = 16384       # of the input kept for retrieval
MAX_COMPARED = 8         # error events besides the first failure compared with known failures


class _Tally:
    """Signature counts and the first few evidence lines per cause, in bounded memory."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, int], int] = defaultdict(int)
        self.sigs: dict[tuple[str, int], CompiledSignature] = {}
        self.evidence: dict[str, list[dict]] = defaultdict(list)
        self.agent_echoes: dict[tuple[str, int], int] = defaultdict(int)
        self.conditions: set[str] = set()  # `when` / `unless` regexes seen in some line
        self.rank_values: RankValues[Line] = RankValues()
        self.head = b""  # the input's first bytes: what retrieval reads when no line is an error
        self.patch_shown: dict[str, dict] = {}  # patch id -> the first line showing its precondition
        self.structural: dict[str, list[dict]] = defaultdict(list)  # cause -> structural evidence
        self.structural_scores: dict[str, float] = defaultdict(float)
        self.versions = versions.VersionFacts()  # driver and build CUDA versions the log states
        self.gpus = gpu_processes.GpuProcesses()  # nvidia-smi's process rows
        self.nccl = NcclRanks()  # NCCL processes' ranks, from their communicator lines
        self.own_ops: dict[int, str] = {}  # rank -> operation of its own mismatch report (older releases)
        self.own_op_line: dict | None = None  # the first such report
        self.store_waits: list[store_wait.StoreWait] = []  # store waits that ran out, read key by key
        self.named: set[str] | None = None  # the job's Python files the log names; collected only with --repo

    def add(self, ln: Line, sig: CompiledSignature) -> None:
        k = (sig.cause, sig.index)
        if sig.kind == "echo" and AGENT.search(ln.body):
            # the agent stops the survivors after any failure: weak evidence for one cause
            self.agent_echoes[k] += 1
        else:
            self.counts[k] += 1
        self.sigs[k] = sig
        ev = self.evidence[sig.cause]
        # one line per signature: whether a signature counts (its `when` / `unless`) is known only at the end,
        # so a line two signatures of one cause match is kept for each (deduplicated once that is known)
        if len(ev) < MAX_EVIDENCE and not any(e["file"] == ln.file and e["line"] == ln.line and e.get("sig") == k
                                              for e in ev):
            ev.append({"file": ln.file, "line": ln.line, "text": ln.text[:500], "rank": ln.rank,
                       "kind": sig.kind, "proves": sig.proves, "sig": k, "ln": ln,  # ln: its rank, read at the end
                       **_symptom(sig)})


def _unindented(chunk: bytes, indent: str) -> bytes:
    """The chunk's lines without the lead every line of the log shares (a paste's indentation or quote marks)."""
    if not indent:
        return chunk
    lead = indent.encode("ascii")
    return b"\n".join(line[len(lead):] if line.startswith(lead) else line for line in chunk.split(b"\n"))


def _scan_source(idx: int, src: Source, pre: Prefilter, matcher: Matcher, builder: EventBuilder,
                 tally: _Tally, stats: ScanStats, progress=None) -> None:
    state: dict = {}
    folder = torchrun_folder(src.name) if src.rank_hint is not None else None
    if folder is not None:  # a torchrun --log-dir file: its folder's number is a local rank
        builder.locals.folder(idx, folder, src.rank_hint)
    with src.open() as stream:
        indent = None
        for n, (first, block, lo, hi) in enumerate(spans(stream, stats, src.name)):
            if indent is None:
                indent = common_indent(bytes(block[lo:min(hi, lo + HEAD_BYTES)]))
            if len(tally.head) < HEAD_BYTES:
                tally.head += _unindented(bytes(block[lo:min(hi, lo + HEAD_BYTES - len(tally.head))]), indent)
            if progress is not None and n % 64 == 63:
                progress(idx + 1, stats)
            for line_no, raw in pre.lines(first, block, state, lo, hi):
                stats.candidates += 1
                if tally.named is not None and b".py" in raw:  # a frame or torchrun's `x.py FAILED` (--repo)
                    code_evidence.add_named(raw, tally.named)
                text = raw.decode("utf-8", "replace")
                if "\ufffd" in text:
                    stats.invalid_utf8 = True
                text = strip_ansi(text).rstrip("\r")
                if indent and text.startswith(indent):
                    text = text[len(indent):]
                for text, j_rank, j_ts in json_lines.lines_of(text):
                    # a JSON-object line (a collector's, a JSON logger's): the lines it carries, its rank and time
                    rank, local, ts, body, task = peel_prefix(text)
                    if rank is None and local is None and j_rank is not None:
                        rank = j_rank
                    ts = ts if ts is not None else j_ts
                    local = local if rank is None else None
                    rank = local if rank is None else rank
                    by_task = rank is None and task is not None
                    rank = task if by_task else rank
                    if task is not None:
                        builder.locals.task(idx, task)
                    stated = "comm 0x" in text and tally.nccl.read(text)
                    if "NCCL" in text:
                        tally.nccl.see(text)
                    if rank is None:
                        if src.rank_hint is not None:
                            rank, local = src.rank_hint, src.rank_hint if folder is not None else None
                        elif tally.nccl.ranks:
                            rank = tally.nccl.rank_of(text)
                        if rank is None:
                            rank = message_rank(body)
                    elif folder is not None and local is None and torch_rank(text) is not None:
                        # a worker's own [rank3]: line in its --log-dir file: the folder's local rank is global rank 3
                        builder.locals.pair(folder, src.rank_hint, rank)
                    if ts is None:
                        ts = parse_timestamp(body)
                    hits = matcher.match_line(text)
                    if hits and "store based barrier" in text and store_wait.short_barrier(text):
                        hits = [replace(h, level="symptom") if h.cause == store_wait.BARRIER_CAUSE else h for h in hits]
                    if structure.MISMATCH in text:
                        hits = _read_mismatch(text, src.name, line_no, rank, hits, tally, matcher)
                        own = structure.own_fingerprint(text)
                        if own is not None and len(tally.own_ops) < RankValues.MAX_RANKS:
                            tally.own_ops.setdefault(*own)
                            tally.own_op_line = tally.own_op_line or {"file": src.name, "line": line_no,
                                                                      "text": text[:500], "rank": own[0]}
                    where = {"file": src.name, "line": line_no, "rank": rank}
                    tally.versions.read(text, where)
                    wait = store_wait.read(text, where) if "wait" in text else None
                    if wait is not None:
                        store_wait.keep(tally.store_waits, wait)
                    tally.gpus.read(text, where)
                    for patch in preconditions.met_in(text):
                        tally.patch_shown.setdefault(patch, {"file": src.name, "line": line_no, "text": text[:500]})
                    if matcher.conditions:
                        tally.conditions.update(matcher.match_conditions(text))
                    ln = Line(idx, src.name, line_no, rank, ts, text, hits, body, local is not None, task, by_task)
                    if matcher.rank_values:
                        for cond, who, value in matcher.match_rank_values(text, rank):
                            tally.rank_values.add(cond, who, value, ln)
                    for h in hits:
                        tally.add(ln, h)
                    if not (stated and not hits):  # a communicator line only names a process's rank
                        builder.feed(ln, body)


def _read_mismatch(text: str, file: str, line_no: int, rank: int | None, hits: list, tally: _Tally,
                   matcher: Matcher) -> list:
    """A collective mismatch where every rank ran the same operation with different sizes is not a collective
    skipped by some ranks: that reading's hits are dropped and the line is structural evidence of the size causes."""
    mm = structure.collective_mismatch(text)
    if mm is None or not mm.same_op:
        return hits
    _add_size_evidence(mm, {"file": file, "line": line_no, "text": text[:500], "rank": rank}, tally, matcher)
    return [h for h in hits if h.cause != structure.MISMATCH_CAUSE]


def _add_size_evidence(mm: structure.Mismatch, where: dict, tally: _Tally, matcher: Matcher) -> None:
    """A same-operation mismatch is structural evidence of the causes that make the ranks' sizes differ."""
    weight = 3.0
    for cause in structure.MISMATCH_SIZE_CAUSES:
        if cause in matcher.entries:
            if not tally.structural[cause]:
                tally.structural_scores[cause] += weight
            if len(tally.structural[cause]) < MAX_EVIDENCE:
                tally.structural[cause].append({**where, "kind": "structural", "proves": mm.proves()})
            weight /= 2


def _read_own_reports(tally: _Tally, builder: EventBuilder, matcher: Matcher) -> None:
    """Older releases' one-rank mismatch reports: where two or more ranks name the same operation, the reading
    "a collective some ranks skipped" is dropped (its hits, counts and evidence) for the size causes."""
    mm = structure.same_op_reports(tally.own_ops)
    if mm is None or tally.own_op_line is None:
        return

    def skipped_reading(sig: CompiledSignature) -> bool:
        return sig.cause == structure.MISMATCH_CAUSE and bool(sig.regex.search(tally.own_op_line["text"]))

    builder.keep_hits(lambda h: not skipped_reading(h))
    for k in [k for k in tally.sigs if skipped_reading(tally.sigs[k])]:
        tally.counts.pop(k, None)
        tally.agent_echoes.pop(k, None)
        ev = tally.evidence.get(k[0], [])
        ev[:] = [e for e in ev if e.get("sig") != k]
    _add_size_evidence(mm, tally.own_op_line, tally, matcher)


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


def _scan_all(sources, context: str | None, matcher: Matcher, errors: list[dict], progress=None,
              named: bool = False):
    """Stream every source into events and a tally; conditions met by the logs or the description are applied.
    `named`: also collect the Python files the log names (tally.named; for --repo). Returns (builder, tally,
    stats, files, prefilter, differing rank values)."""
    pre = Prefilter(matcher)
    builder = EventBuilder()
    tally = _Tally()
    tally.named = set() if named else None
    stats = ScanStats()
    files = 0
    for idx, src in enumerate(sources):
        files += 1
        try:
            _scan_source(idx, src, pre, matcher, builder, tally, stats, progress)
        except InputError as exc:
            errors.append({"path": src.name, "error": str(exc), "explicit": src.explicit})
        except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:  # unreadable, bad or cut .gz/.bz2/.xz
            errors.append({"path": src.name, "error": f"{src.name}: cannot read: {exc}", "explicit": src.explicit})
        if progress is not None:
            progress(files, stats)

    _read_own_reports(tally, builder, matcher)
    differing = tally.rank_values.differing()
    tally.conditions.update(differs_key(c) for c in differing)
    if context and matcher.conditions:
        # what the person says they ran (mpirun, several jobs on one machine, code copied by hand) is a fact
        # about the run as a log line is: it meets `when` / `unless` conditions the same way
        tally.conditions.update(c for line in context.splitlines() for c in matcher.match_conditions(line))
    if any(s.conditional for s in matcher.signatures):
        builder.keep_hits(lambda h: h.active(tally.conditions))  # a signature whose condition failed did not match
    return builder, tally, stats, files, pre, differing


def diagnose_sources(sources, context: str | None = None, references_root=None,
                     errors: list[dict] | None = None, progress=None, code: dict | None = None) -> dict:
    """Diagnose the sources; with `code` (code_evidence.check's findings on the job's code) weigh those too."""
    matcher = matcher_for(references_root)
    errors = errors if errors is not None else []
    builder, tally, stats, files, pre, differing = _scan_all(sources, context, matcher, errors, progress,
                                                             named=code is not None)
    seen = tally.conditions
    _add_rank_value_evidence(tally, matcher, differing)
    scores = _score(tally)
    found = find_first_failure(builder, tally.nccl)
    first, first_line, echoes, alike = found.event, found.line, found.echoes, found.all_ranks
    explained: list = []
    # echoes (peers' lost connections, torchrun's SIGTERMs and summary) answer "a rank failed first" only next to
    # that failure: a rank's own error message (not a timeout: a waiting rank; not a traceback cut before its
    # message), or the agent's report of a rank killed by a signal (no message of its own). Alone they leave the
    # failing rank's own error unread: a candidate, never the answer
    own_error = first is not None and not first.is_timeout and not FRAME.match(first.key_line().body)
    killed = first is None and first_line is not None and bool(KILLED.search(first_line.body))
    symptoms = set() if own_error or killed else {ECHO_CAUSE}
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

    too_old = tally.versions.too_old()
    if too_old and versions.CAUSE in matcher.entries:
        tally.structural[versions.CAUSE] += too_old
        tally.structural_scores[versions.CAUSE] += VERSION_WEIGHT
    foreign = tally.gpus.foreign()
    if foreign is not None:
        proves, rows = foreign
        for cause, weight in gpu_processes.CAUSES:
            if cause in matcher.entries:
                tally.structural[cause] += [{**r, "kind": "structural", "proves": proves} for r in rows[:MAX_EVIDENCE]]
                tally.structural_scores[cause] += weight
    p2p = p2p_matrix.broken_p2p(_plain(tally.head)) if b"P2P=Enabled" in tally.head else None
    if p2p is not None and p2p_matrix.CAUSE in matcher.entries:
        proves, header = p2p
        tally.structural[p2p_matrix.CAUSE].append({"file": "<log>", "line": None, "text": header, "rank": None,
                                                   "kind": "structural", "proves": proves})
        tally.structural_scores[p2p_matrix.CAUSE] += p2p_matrix.WEIGHT
    shown = {"file": first_line.file, "rank": first_line.rank, "text": first_line.text} if own_error else None
    listed = {e.rank for e in builder.summary}  # torchrun's summary: every rank of a one-node job
    job_size = len(listed) if listed and listed == set(range(len(listed))) else None
    for cause, weight, ev in store_wait.evidence(tally.store_waits, shown, job_size):
        if cause in matcher.entries:
            tally.structural[cause].append(ev)
            tally.structural_scores[cause] += weight
    for cause, sc in tally.structural_scores.items():
        scores[cause] += sc
    context_hits: list[dict] = []
    set_up: dict[str, float] = {}  # cause -> what its setting keywords scored (SETTING_WEIGHT at most)
    if context:
        kw_weight = KEYWORD_WEIGHT / 2 if first is not None and explained else KEYWORD_WEIGHT
        kw_hits = matcher.match_keywords(context)
        # beside a log, a description naming only the symptom ("it hangs", "a timeout") says what any cause looks
        # like: half weight, so the log's own evidence (its neighbours) decides; one naming a cause too keeps both
        # (it names the symptom to explain). Grouped cross-validation on train (retrieval_cv --grouped): diagnosis
        # top-1 381 -> 384 of 433. With no log the words are the whole account, as a short log of prose is: the
        # symptom's words count half beside words naming a cause (_weigh_keywords), in full alone (words-only
        # cases of evals/cases.jsonl: top-1 47 -> 49 of 61)
        has_log = bool(_plain(tally.head))
        symptom_only = has_log and all(cause in SYMPTOM_CAUSES or (cause, kw) in matcher.settings
                                       for cause, kw, _ in kw_hits)
        weighed = [(*h, kw_weight / 2 if symptom_only else kw_weight) for h in kw_hits] if has_log \
            else _weigh_keywords(kw_hits, kw_weight)
        for cause, kw, words, weight in _settings_aside(weighed, matcher.settings if has_log else set(), set_up):
            scores[cause] += weight
            context_hits.append({"cause": cause, "keyword": kw, "words": words, "text": context,
                                 "setting": has_log and (cause, kw) in matcher.settings})
        for i, line in enumerate(context.splitlines(), 1):
            for h in (h for h in matcher.match_line(line) if h.active(seen)):
                scores[h.cause] += h.weight
                # an error line pasted into the description is the log's text; other words stay words
                quoted = h.kind == "root" and bool(ERRORISH.search(line) or EXC_LINE.match(line.strip()))
                tally.evidence[h.cause].append({"file": "<context>", "line": i, "text": line[:500], "rank": None,
                                                "kind": h.kind, "proves": h.proves, "quoted": quoted,
                                                **_symptom(h)})
            for patch in preconditions.met_in(line):
                tally.patch_shown.setdefault(patch, {"file": "<context>", "line": i, "text": line[:500]})
    prose_hits: list[dict] = []
    if stats.lines <= PROSE_LINES and not tally.counts and not any(e.is_error for e in builder.events):
        # a few lines without a single error line are someone's account of the failure (a long quiet log is a
        # job's own output, whose banners and settings say nothing of a cause): its words count as words
        prose = "\n".join(ln for ln in _plain(tally.head).splitlines() if not JOB_RECORD.match(ln.strip()))
        weighed = _settings_aside(_weigh_keywords(matcher.match_keywords(prose), PROSE_WEIGHT), matcher.settings,
                                  set_up)
        for cause, kw, words, weight in weighed:
            scores[cause] += weight
            prose_hits.append({"cause": cause, "keyword": kw, "words": words, "text": prose[:500],
                               "setting": (cause, kw) in matcher.settings})

    evidence_of: dict[str, list[dict]] = {}
    for cause in scores:
        evidence_of[cause] = _unique_lines([{**{k: v for k, v in ev.items() if k not in ("sig", "ln")},
                                             **({"rank": builder.global_rank(ev["ln"])} if "ln" in ev else {})}
                                            for ev in tally.evidence.get(cause, [])
                                            if "sig" not in ev or tally.sigs[ev["sig"]].active(seen)])
        if cause in symptoms:
            evidence_of[cause] = [{**ev, "symptom": True} for ev in evidence_of[cause]]
        evidence_of[cause] += tally.structural.get(cause, [])
    # causes the log's own lines named and their conditions ruled out: no neighbour or alternative brings them back
    ruled = alternatives.ruled_out([tally.sigs[k] for k in (*tally.counts, *tally.agent_echoes)], seen)
    if calibrate.needs_more(evidence_of, scores, first):
        # no signature explains the first failure: compare the log's failures with known ones
        _compare_with_known(builder, first, references_root, context, scores, evidence_of, matcher, tally.head,
                            ruled)

    ranked = sorted(((c, s) for c, s in scores.items() if s > 0 and c in matcher.entries),
                    key=lambda cs: (-calibrate.order(evidence_of.get(cs[0], [])), -cs[1], cs[0]))
    ranked = _break_tie(ranked, evidence_of, lambda: _votes(builder, first, references_root, context, tally.head))
    causes = []
    for cause, score in ranked:
        e = matcher.entries[cause]
        evidence = evidence_of.get(cause, [])
        if first_line is not None and any(h.cause == cause for h in first_line.hits):
            # the first failure's own line leads the evidence of the cause it shows
            own = [h for h in first_line.hits if h.cause == cause]
            lead = {"file": first_line.file, "line": first_line.line, "text": first_line.text[:500],
                    "rank": first.key_line().rank if found.waiting and first is not None else first_line.rank,
                    "kind": "first failure", "proves": own[0].proves,
                    **_lead_mark(own, cause in symptoms)}
            evidence = [lead] + [e for e in evidence if (e["file"], e["line"]) != (lead["file"], lead["line"])]
        evidence += _keyword_evidence(context_hits, cause, "<context>", "the description")
        evidence += _keyword_evidence(prose_hits, cause, "<log>", "the log (no error line in it)")
        for ev in evidence:
            ev["level"] = calibrate.level_of(ev)
            ev.pop("symptom", None)
            ev.pop("context", None)
        level = calibrate.cause_level(evidence)
        # the strongest evidence first, so the first lines shown are what the answer rests on
        evidence.sort(key=lambda ev: -calibrate.LEVELS.index(ev["level"]))
        causes.append({"id": cause, "score": round(score, 2), "level": level, "title": e.title, "entry": e.anchor,
                       "patch": e.patch, **calibrate.patch_gate(e.patch, tally.patch_shown),
                       "check": calibrate.check_for(e), "evidence": evidence[:MAX_EVIDENCE]})
    verdict = calibrate.verdict(causes)
    if verdict == "confident" and len(causes) <= alternatives.ALTERNATIVES:
        if tally.store_waits:
            ruled = ruled | {store_wait.REACHED}  # the store answered: not unreachable, however alike the text
        causes += _alternatives(builder, first, references_root, context, matcher, tally.head, causes, ruled)
    for i, c in enumerate(causes):
        c["role"] = "candidate" if verdict != "confident" else "top" if i == 0 else "alternative"
    code_section = None
    if code is not None:
        causes, verdict, code_section = code_evidence.weigh(
            causes, verdict, code, own_error, matcher.entries, lambda c: alternatives.roots_of(c, references_root),
            tally.named)
    top = matcher.entries[causes[0]["id"]] if verdict == "confident" else None
    because = blame_awaited(found, causes[0]["id"] if causes else None)  # a lone timeout, read by its cause
    first_line = found.line
    ff = None
    if first_line is not None:
        ff = {"rank": first_line.rank, "file": first_line.file, "line": first_line.line,
              "text": first_line.text[:500], "ts": _fmt_ts(first_line.ts)}
        if first is None or found.seen_by:
            ff["seen_by"] = found.seen_by  # the rank is named by the agent or by the others' reports
        if alike:
            ff["all_ranks"] = True
        if found.failed:
            ff["failed_ranks"] = found.failed  # ranks with an error of their own (echoes and timeouts aside)
        if found.waiting:
            ff["waiting"] = True  # every failing rank timed out waiting for another
            ff["timed_out_ranks"] = found.timed_out
            if found.missing:
                ff["missing_ranks"] = found.missing  # the job's other ranks: the ones the others waited for
        if because:
            ff["because"] = because  # why the rank named is not the one that reported the timeout
    # store waits with no rank's own error beside them (else they are its echoes) say whom the waiting ranks missed
    waits = [] if own_error else tally.store_waits
    if ff is not None and "missing_ranks" not in ff and (missed := store_wait.missing_ranks(waits)):
        ff["missing_ranks"] = missed
    echo_list = [{"file": e.key_line().file, "line": e.key_line().line, "rank": e.rank,
                  "text": e.key_line().text[:300]} for e in echoes[:20]]
    thin = not causes or causes[0]["score"] < THIN_SCORE or first is None or verdict != "confident"
    result = {
        "verdict": verdict,
        "causes": causes,
        "first_failure": ff,
        "patch": causes[0]["patch"] if top and causes[0]["patch_ready"] else None,
        "patch_withheld": causes[0]["patch_note"] if top and causes[0]["patch"] and not causes[0]["patch_ready"] else None,
        "entry": top.anchor if top else None,
        "fix": _first_paragraph(top.section("Fix")) if top else None,
        "verify": top.verify if top else None,
        "echoes": echo_list,
        "next_step": _next_step(causes, first, first_line is None and not echoes and stats.lines > 0,
                                first_line.rank if first is None and first_line is not None else None,
                                waits) if thin else None,
        "errors": [{"path": e["path"], "error": e["error"]} for e in errors],
        **({"code": code_section} if code_section is not None else {}),
        **({"track_record": rec} if causes and (rec := track_record(causes[0]["id"], verdict, references_root)) else {}),
        "stats": {"files": files, "bytes": stats.bytes, "lines": stats.lines, "candidates": stats.candidates,
                  "cut_lines": stats.cut_lines, "invalid_utf8": stats.invalid_utf8, "engine": pre.engine,
                  "events": len(builder.events), "events_dropped": builder.dropped},
    }
    return result


def _symptom(sig: CompiledSignature) -> dict:
    """The mark of evidence from a `level: symptom` signature (a line several causes print) or a `level: context`
    one (a line that only says how the job was launched)."""
    return {sig.level: True} if sig.level in calibrate.WEAK_MARKS else {}


def _lead_mark(own: list[CompiledSignature], echo_symptom: bool) -> dict:
    """The mark of the first failure's own line: the weakest its signatures agree on (a symptom when the echoes
    make it one); none when one of them is a plain signature."""
    marks = [_symptom(h) for h in own]
    if not echo_symptom and not (marks and all(marks)):
        return {}
    return {"symptom": True} if echo_symptom or any(m.get("symptom") for m in marks) else {"context": True}


def _unique_lines(evidence: list[dict]) -> list[dict]:
    """The evidence with each (file, line) once, the first kept."""
    seen: set = set()
    out = []
    for ev in evidence:
        if (ev["file"], ev["line"]) not in seen:
            seen.add((ev["file"], ev["line"]))
            out.append(ev)
    return out


def _weigh_keywords(hits: list[tuple[str, str, str]], weight: float) -> list[tuple[str, str, str, float]]:
    """Each keyword hit of a log that is someone's account with its weight: words that only name the symptom (a
    hang, a timeout, a dead peer) count half when the same account also names a specific cause. (Beside a log, a
    --context line saying what the user was debugging keeps both, not weighed here: it names the symptom to
    explain, not a cause.)"""
    specific = any(cause not in SYMPTOM_CAUSES for cause, _, _ in hits)
    return [(cause, kw, words, weight / 2 if specific and cause in SYMPTOM_CAUSES else weight)
            for cause, kw, words in hits]


def _keyword_evidence(hits: list[dict], cause: str, file: str, who: str) -> list[dict]:
    """The evidence line of `cause`'s best keyword hit in a person's words (`<context>`) or a log of prose (`<log>`):
    a keyword naming the cause before one that only names the set-up (`context`: it says how the job ran)."""
    return [{"file": file, "line": None, "text": h["text"], "rank": None,
             "kind": "keyword", "proves": f"{who} says {h['words']!r} (/{h['keyword']}/)"
             + (" (how the job was set up)" if h["setting"] else ""), "context": h["setting"]}
            for h in sorted(hits, key=lambda h: h["setting"]) if h["cause"] == cause][:1]


def _settings_aside(weighed: list[tuple[str, str, str, float]], settings: set[tuple[str, str]],
                    spent: dict[str, float]) -> list[tuple[str, str, str, float]]:
    """Keyword hits with those that only name the job's set-up (`settings`: (cause, regex); `--nnodes`,
    `drop_last`, `LOCAL_RANK` say how the job ran, which any cause's job shows) worth SETTING_WEIGHT at most per
    cause, however many of them the description and the log's prose repeat (`spent`: what each cause has had)."""
    out = []
    for cause, kw, words, weight in weighed:
        if (cause, kw) in settings:
            weight = max(0.0, min(weight, SETTING_WEIGHT - spent.get(cause, 0.0)))
            spent[cause] = spent.get(cause, 0.0) + weight
        out.append((cause, kw, words, weight))
    return out


def _plain(head: bytes) -> str:
    """The first lines of the input without rank prefixes and without an environment report pasted beside the
    log (env_report: collect_env, `transformers-cli env`, ds_report): what retrieval reads with the failures."""
    lines = [split_prefix(strip_ansi(ln))[2] for ln in head.decode("utf-8", "replace").splitlines()]
    return "\n".join(env_report.without_reports(lines)).strip()


def _compared(builder: EventBuilder, first: Event | None, references_root):
    """(known failures, the events compared with them, their failures, whether one is a same-operation mismatch:
    it reads like the different-operation one word for word, so never that cause)."""
    from distdoctor.diagnose.retrieval import known_failures

    known = known_failures(str(references_root) if references_root else None)
    events = _compared_events(builder, first)
    failures = [structure.failure_of(e) for e in events]
    same_op = any((mm := structure.collective_mismatch(f.message)) is not None and mm.same_op for f in failures)
    return known, events, failures, same_op


def _structural_item(event: Event, f: structure.Failure, m) -> dict:
    """Evidence: the event's failure has the message template of a known failure m."""
    key = event.key_line()
    return {"file": key.file, "line": key.line, "text": key.text[:500], "rank": key.rank, "kind": "structural",
            "known": m.doc_id,
            "proves": f"{f.exc_type} with the same message template as a known {m.cause} failure "
                      f"({m.where}: {m.text[:160]!r})"}


def _similar_item(m, from_log: bool, how: str) -> dict:
    """Evidence: the log (or, without one, the person's description: words) is `how` ("most like", "also like")
    the known failure m among BM25 neighbours."""
    return {"file": m.where if from_log else "<context>", "line": None, "text": m.text, "rank": None,
            "kind": "similar" if from_log else "keyword",
            "proves": f"{'the log' if from_log else 'your description'} is {how} {m.doc_id} "
                      f"(BM25 neighbours' votes: {m.score:.2f} of the best cause's)"}


def _compare_with_known(builder: EventBuilder, first: Event | None, references_root, context: str | None,
                        scores: dict, evidence_of: dict, matcher: Matcher, head: bytes = b"",
                        ruled: frozenset[str] | set[str] = frozenset()) -> None:
    """Structural matches of the log's failures (first failure first) with the knowledge base's quotes and the
    corpus's train cases, then BM25 neighbours of the failure text: new causes, or evidence for named ones;
    `ruled`: causes the log's own conditions ruled out (alternatives.ruled_out), which no neighbour brings back."""
    known, events, failures, same_op = _compared(builder, first, references_root)
    for i, (ev, f) in enumerate(zip(events, failures)):
        for m in known.structural([f]):
            if m.cause not in matcher.entries or (same_op and m.cause == structure.MISMATCH_CAUSE):
                continue
            if not any(x["kind"] == "structural" for x in evidence_of.get(m.cause, [])):
                scores[m.cause] += (STRUCTURAL_WEIGHT if i == 0 else STRUCTURAL_WEIGHT / 2) * m.score
                evidence_of.setdefault(m.cause, []).append(_structural_item(ev, f, m))
    if any(calibrate.tier(evs) for c, evs in evidence_of.items() if scores.get(c, 0) > 0):
        return  # the log itself names a cause: neighbours would only add weaker candidates
    from_log = bool(failures or _plain(head))
    for rank_, m in enumerate(known.similar(_query(failures, head, context))):
        if m.cause not in matcher.entries or m.cause in ruled or (same_op and m.cause == structure.MISMATCH_CAUSE):
            continue
        scores[m.cause] += SIMILAR_WEIGHT * m.score / (1 + rank_)  # agreeing with the words adds up
        evidence_of.setdefault(m.cause, []).append(_similar_item(m, from_log, "most like"))


def _alternatives(builder: EventBuilder, first: Event | None, references_root, context: str | None,
                  matcher: Matcher, head: bytes, causes: list[dict], ruled: set[str]) -> list[dict]:
    """After a confident top cause: known failures with the log's message templates, then BM25 neighbours
    (distdoctor/diagnose/alternatives.py), scored as _compare_with_known would, then the top cause's usual roots."""
    known, events, failures, same_op = _compared(builder, first, references_root)
    if same_op:
        ruled = ruled | {structure.MISMATCH_CAUSE}
    structural = [(m.cause, (STRUCTURAL_WEIGHT if i == 0 else STRUCTURAL_WEIGHT / 2) * m.score,
                   _structural_item(event, f, m))
                  for i, (event, f) in enumerate(zip(events, failures)) for m in known.structural([f])]

    def similar() -> list[tuple[str, float, dict]]:
        from_log = bool(failures or _plain(head))
        return [(m.cause, SIMILAR_WEIGHT * m.score / (1 + i), _similar_item(m, from_log, "also like"))
                for i, m in enumerate(known.similar(_query(failures, head, context)))
                if m.score >= alternatives.ALT_SIMILAR_MIN]

    roots = alternatives.roots_of(causes[0]["id"], references_root) if causes else ()
    return alternatives.pick(structural, similar, matcher.entries, causes, ruled, roots)


def _break_tie(ranked: list[tuple[str, float]], evidence_of: dict[str, list[dict]],
               votes) -> list[tuple[str, float]]:
    """The causes that tie for first place (same order, same score: one line several causes read alike, such as
    NCCL's "unhandled system error") ordered by the votes of the log's BM25 neighbours (`votes()`: cause -> share
    of the best cause's votes), not by name; the rest as ranked. (calibrate.verdict makes a tie candidates.)"""
    if len(ranked) < 2:
        return ranked
    key = (calibrate.order(evidence_of.get(ranked[0][0], [])), round(ranked[0][1], 2))
    n = 1
    while n < len(ranked) and (calibrate.order(evidence_of.get(ranked[n][0], [])), round(ranked[n][1], 2)) == key:
        n += 1
    if n == 1:
        return ranked
    by_votes = votes()
    return sorted(ranked[:n], key=lambda cs: -by_votes.get(cs[0], 0.0)) + ranked[n:]


def _votes(builder: EventBuilder, first: Event | None, references_root, context: str | None,
           head: bytes) -> dict[str, float]:
    """Cause -> the best share of votes the log's BM25 neighbours give it."""
    known, _, failures, _ = _compared(builder, first, references_root)
    out: dict[str, float] = {}
    for m in known.similar(_query(failures, head, context)):
        out[m.cause] = max(out.get(m.cause, 0.0), m.score)
    return out


def _compared_events(builder: EventBuilder, first: Event | None) -> list[Event]:
    """The first failure, then the log's other error events of their own (no agent lines, no echoes)."""
    events = [first] if first is not None else []
    return events + [e for e in builder.events
                     if e is not first and e.is_error and not e.is_agent and not e.is_echo][:MAX_COMPARED]


def _query(failures: list[structure.Failure], head: bytes, context: str | None) -> str:
    """What retrieval reads: the failures' messages, the input's first lines and the person's description (what
    they ran names the setting a log leaves out: cross-validated on the train split, it ranks better with it)."""
    return "\n".join(part for part in ("\n".join(f.message for f in failures), _plain(head), context or "")
                     if part.strip()).strip()


def retrieval_query(text: str, context: str | None = None, references_root=None) -> str:
    """The text retrieval would compare with known failures for this log (the evals' cross-validation ranks
    every train case's query, whether or not its diagnosis reaches retrieval)."""
    builder, tally, *_ = _scan_all([_text_source("<text>", text, None)], context, matcher_for(references_root), [])
    first = find_first_failure(builder).event
    return _query([structure.failure_of(e) for e in _compared_events(builder, first)], tally.head, context)


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


def _next_step(causes: list[dict], first: Event | None, quiet_log: bool = False, named: int | None = None,
               store_waits: list | None = None) -> str:
    if store_waits:
        return store_wait.next_step(store_waits)
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
    if first is None and named is not None:
        return (f"No rank's own error is in these logs: the launcher's summary names rank {named} as the first failure, "
                f"and the other lines only echo it (SIGTERM, exit codes, lost connections). Read rank {named}'s own "
                "error: its output before the summary, or re-run with per-rank logs (torchrun --log-dir DIR --tee 3) "
                "and diagnose the folder.")
    if first is None:
        return ("No rank's own error is in these logs: collect every rank's output (torchrun --log-dir DIR "
                "--tee 3, or srun --label), then diagnose the folder; for a hang, dump all ranks' stacks with "
                "py-spy and add dist.monitored_barrier around the suspected step.")
    return ("The evidence is thin: re-run with TORCH_DISTRIBUTED_DEBUG=INFO and NCCL_DEBUG=INFO on every rank "
            "and diagnose the new logs together with these.")


def diagnose_paths(paths: list[str], context: str | None = None, references_root=None, progress=None,
                   code: dict | None = None) -> dict:
    """Diagnose log files, folders of per-rank logs, '-' (stdin), plain or .gz; `code`: see diagnose_sources."""
    errors: list[dict] = []
    result = diagnose_sources(expand([str(p) for p in paths], errors), context, references_root, errors, progress,
                              code)
    result["input_error"] = any(e.get("explicit", True) for e in errors)
    return result


def diagnose_text(text: str, context: str | None = None, name: str = "<text>", references_root=None,
                  files: dict[str, str] | None = None, code: dict | None = None) -> dict:
    """Diagnose a log given as a string (may be empty when only `context` is known), with optional per-rank
    files given as {relative path: text} (the rank comes from the path, as for a folder on disk)."""
    sources = [_text_source(name, text, None)]
    for rel, body in sorted((files or {}).items()):
        sources.append(_text_source(rel, body, rank_from_path(rel)))
    return diagnose_sources(sources, context, references_root, code=code)


def _text_source(name: str, text: str, rank: int | None) -> Source:
    data = (text or "").encode("utf-8", "replace")
    return Source(name, lambda: io.BytesIO(data), rank)
