"""Signature matching against the knowledge base, with a cheap prefilter for big logs.

The signatures come from references/ through distdoctor.knowledge (never a copy here). For speed,
each signature regex is reduced to literal "anchors" (one of which any match must contain); all
anchors, plus the structural ones below, form one trie-shaped regex that is searched over whole
blocks of text. Only lines it hits get the per-signature regexes.
"""

from __future__ import annotations

import copy
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]
    from re import _constants as sre_c  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse  # type: ignore[no-redef]
    import sre_constants as sre_c  # type: ignore[no-redef]

from distdoctor import paths
from distdoctor.diagnose import gpu_processes, preconditions, versions
from distdoctor.diagnose.rank_values import ranks_differ, values_in
from distdoctor.knowledge import Entry, KnowledgeError, load_entries

# Log syntax every diagnosis needs, whatever the knowledge base says: where a traceback starts,
# frames, exception lines, crashes, and the torchrun agent's summaries. These only make a line a
# candidate; they never name a cause.
STRUCTURAL_ANCHORS = [
    "Traceback (most recent call last)", 'File "', "Error", "Exception", "Exit", "Interrupt",
    "ERROR", "FAILED", "Fatal Python error", "Root Cause", "Failures:", "SIGTERM", "Segmentation fault",
    "Aborted", "Killed", "Timeout", "Timed out",
    "terminated with",  # torch.multiprocessing.spawn: "Process 0 terminated with the following error:"
]
# Structural regexes (each starts with a rare character): glog error/fatal lines (E1123 07:09:50,
# [E1123 ...], c10's [E626 ...]; the torchrun agent's "failed (exitcode ...)" lines among them) and C++ crash
# text. The glog date is spelled as a month and day, not any 3-4 digits: a multi-pattern engine then finds
# them at literal speed among the INFO lines (I1123 07:09:50) that fill a big log.
_GLOG_DATE = r"(?:[1-9]|0[1-9]|1[0-2])[0-3]\d \d\d:\d\d"
STRUCTURAL_PATTERNS = ["E" + _GLOG_DATE, "F" + _GLOG_DATE, r"\[E ", r"\[F ", r"terminate called", r"what\(\): ",
                       r"comm 0x[0-9a-f]+ rank \d+ n[Rr]anks"]  # NCCL names a process's rank (prefixes.NcclRanks)
_MIN_ANCHOR = 3
_MAX_ANCHOR = 20
# Characters frequent at the start of ordinary log text: anchors avoid starting with them, since
# the prefilter regex is tried at every position whose character can start an anchor.
# How good a character is to start an anchor with: the prefilter regex is tried at every position
# whose character can start an anchor, so anchors start with characters rare in ordinary log lines.
_UPPER_RARITY = "ETAOINSRHLDCUMFPGWYBVKXJQZ"  # frequent first
_LOWER_RARITY = "etaoinsrhldcumfpgwybvkxjqz"


def _start_score(ch: str) -> int:
    if ch in _UPPER_RARITY:
        return 10 + _UPPER_RARITY.index(ch)
    if ch in "'\"<>*#!@{}|~^`$%&?;+":
        return 5
    if ch in _LOWER_RARITY:
        return 1 + _LOWER_RARITY.index(ch) // 7
    if ch.isascii():
        return 0
    return 30  # non-ASCII punctuation such as curly quotes



@dataclass(frozen=True)
class CompiledSignature:
    cause: str
    index: int
    regex: re.Pattern[str]
    kind: str
    weight: float
    proves: str
    anchors: tuple[str, ...]  # empty: no literal found, always run the regex
    ignore_case: bool
    when: str | None = None  # condition regexes (Matcher.conditions), see Signature
    unless: str | None = None
    differs: str | None = None  # a `when_ranks_differ` regex (Matcher.rank_values)
    not_differs: str | None = None  # an `unless_ranks_differ` regex
    level: str | None = None  # "symptom": its lines make the cause a candidate only (calibrate.level_of)

    def active(self, seen: set[str]) -> bool:
        """Whether this signature counts, given the conditions met anywhere in the input."""
        return ((self.when is None or self.when in seen) and (self.unless is None or self.unless not in seen)
                and (self.differs is None or differs_key(self.differs) in seen)
                and (self.not_differs is None or differs_key(self.not_differs) not in seen))

    @property
    def conditional(self) -> bool:
        return bool(self.when or self.unless or self.differs or self.not_differs)


def _branches(regex: str) -> list[str]:
    """A regex's top-level alternatives (`a|b(c|d)` -> `a`, `b(c|d)`), escapes and character classes respected."""
    out, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if regex[i + 1:i + 2] == "]" or regex[i + 1:i + 3] == "^]":  # a literal ] first in the class
                i += 2 if regex[i + 1] == "]" else 3
                continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(regex[start:i])
            start = i + 1
        i += 1
    return out + [regex[start:]]


def _has_capitals(regex: str) -> bool:
    plain = re.sub(r"\\.", "", regex)
    return plain != plain.lower()


def smart_case(regex: str) -> re.Pattern[str]:
    """A keyword compiled with smart case per top-level alternative: a branch in lower case ignores case."""
    branches = _branches(regex)
    if len(branches) == 1 or all(_has_capitals(b) for b in branches) or not any(map(_has_capitals, branches)):
        return re.compile(regex, 0 if _has_capitals(regex) else re.I)
    return re.compile("|".join(b if _has_capitals(b) else f"(?i:{b})" for b in branches))


def differs_key(regex: str) -> str:
    """How a met `when_ranks_differ` condition is named among the conditions seen in an input."""
    return "ranks differ: " + regex


def _literal_options(items, ignore_case: bool) -> list[list[str]]:
    """Options of "any of these strings must occur" for a parsed regex sequence."""
    options: list[list[str]] = []
    run: list[str] = []

    def flush():
        if len(run) >= _MIN_ANCHOR:
            options.append(["".join(run)])
        run.clear()

    flat = []
    for op, av in items:  # inline plain groups so their literals join the run
        if op is sre_c.SUBPATTERN:
            flat.extend(list(av[-1]))
        else:
            flat.append((op, av))
    for op, av in flat:
        if op is sre_c.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is sre_c.BRANCH:
            branches = [_best(_literal_options(list(b), ignore_case)) for b in av[1]]
            if branches and all(branches):
                options.append([s for b in branches for s in b])
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT) and av[0] >= 1:
            inner = _best(_literal_options(list(av[2]), ignore_case))
            if inner:
                options.append(inner)
        elif op is sre_c.SUBPATTERN:
            inner = _best(_literal_options(list(av[-1]), ignore_case))
            if inner:
                options.append(inner)
    flush()
    return options


def _best(options: list[list[str]]) -> list[str] | None:
    if not options:
        return None
    return max(options, key=lambda opt: (min(len(s) for s in opt) >= 5, -len(opt), min(len(s) for s in opt)))


def _trim(literal: str) -> str:
    """The substring of a required literal that makes the cheapest anchor (rare first character)."""
    want = min(len(literal), 6)
    best, best_score = 0, -1
    for i, ch in enumerate(literal):
        if len(literal) - i < want:
            break
        score = _start_score(ch)
        if score > best_score:
            best, best_score = i, score
    return literal[best:best + _MAX_ANCHOR]


def anchors_of(regex: str) -> tuple[tuple[str, ...], bool]:
    """Literals one of which every match of `regex` contains (empty if none found), and ignore-case."""
    try:
        parsed = sre_parse.parse(regex)
    except re.error:
        return (), False
    ignore_case = bool(parsed.state.flags & re.IGNORECASE)
    best = _best(_literal_options(list(parsed), ignore_case))
    if not best:
        return (), ignore_case
    return tuple(_trim(s) for s in best), ignore_case


def trie_regex(words: list[str], extra: list[str] = ()) -> str:
    """An alternation of literal words shaped as a trie, so each position costs few branches.

    `extra` regexes join the top level; each must start with a literal character so that the
    regex engine can still skip positions by the set of first characters.
    """
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = True

    def build(node: dict) -> str:
        keys = sorted(k for k in node if k)
        if not keys:
            return ""
        alts = [re.escape(k) + build(node[k]) for k in keys]
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    top = [re.escape(k) + build(trie[k]) for k in sorted(trie)] + list(extra)
    return "|".join(top)


class Matcher:
    """All signatures of a knowledge base, compiled, with the block prefilter."""

    def __init__(self, entries: tuple[Entry, ...]):
        self.entries = {e.cause: e for e in entries}
        self.signatures: list[CompiledSignature] = []
        for e in entries:
            for i, s in enumerate(e.signatures):
                anchors, ic = anchors_of(s.regex)
                self.signatures.append(CompiledSignature(e.cause, i, re.compile(s.regex), s.kind, s.weight,
                                                         s.proves, anchors, ic, s.when, s.unless,
                                                         s.when_ranks_differ, s.unless_ranks_differ, s.level))
        # Conditions (`when` / `unless`) name no cause and add no candidate lines: they are looked for on
        # the lines the prefilter reads anyway (errors, tracebacks, the launcher's summary blocks).
        self.conditions: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = []
        for c in sorted({c for sig in self.signatures for c in (sig.when, sig.unless) if c}):
            anchors, ic = anchors_of(c)
            self.conditions.append((c, re.compile(c), () if ic else anchors))
        # Per-rank values (`when_ranks_differ`): progress lines such as "rank 1: 2 batches" are not
        # errors, so their literals do make lines candidates.
        self.rank_values: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = []
        for c in sorted({c for sig in self.signatures for c in (sig.differs, sig.not_differs) if c}):
            anchors, ic = anchors_of(c)
            self.rank_values.append((c, re.compile(c), () if ic else anchors))
        # Smart case, per alternative: a keyword (or a top-level `|` branch of one) written in lower case matches
        # any case; one with capitals (MASTER_ADDR, IB, RoCE) matches as written, so "RoCE" does not match
        # "process" while `\bslurm\b|SLURM_\w+` still matches "Slurm". (cause, regex as written, compiled)
        self.keywords = [(e.cause, k, smart_case(k)) for e in entries for k in e.keywords]
        # keywords that only say how the job was set up (`level: context`): (cause, regex)
        self.settings = {(e.cause, k) for e in entries for k in e.setting_keywords}
        words = set(STRUCTURAL_ANCHORS)
        for sig in self.signatures:
            for a in sig.anchors:
                # Case-insensitive signatures: the usual spellings of the anchor are searched.
                words.update({a, a.lower(), a.upper(), a.capitalize()} if sig.ignore_case else {a})
        for _, rx, anchors in self.rank_values:
            words.update(anchors)
        # Lines that show a patch's precondition (a device bound by the global rank, a get_future call)
        # are read even when no signature names them.
        words.update(preconditions.anchors())
        words.update(versions.ANCHORS)  # version lines (driver vs build CUDA) are read too
        words.update(gpu_processes.ANCHORS)  # and nvidia-smi's process rows
        # Signatures without any literal are searched over whole blocks with their own regex.
        self.unanchored = [s for s in self.signatures if not s.anchors]
        self.prefilter_words = words
        self.structural_patterns = list(STRUCTURAL_PATTERNS)
        # the pure-Python prefilter (a trie-shaped alternation), compiled only where no faster engine is used
        self.prefilter_pattern = trie_regex(sorted(words), STRUCTURAL_PATTERNS)

    def match_line(self, text: str) -> list[CompiledSignature]:
        """Signatures whose regex is found in one line."""
        hits = []
        low = None
        for s in self.signatures:
            if s.anchors:
                if s.ignore_case:
                    low = low if low is not None else text.lower()
                    if not any(a.lower() in low for a in s.anchors):
                        continue
                elif not any(a in text for a in s.anchors):
                    continue
            if s.regex.search(text):
                hits.append(s)
        return hits

    def match_conditions(self, text: str) -> list[str]:
        """The condition regexes (`when` / `unless` of some signature) found in one line."""
        return [c for c, rx, anchors in self.conditions
                if (not anchors or any(a in text for a in anchors)) and rx.search(text)]

    def match_rank_values(self, text: str, line_rank: int | None) -> list[tuple[str, int, str]]:
        """(condition, rank, value) for each `when_ranks_differ` / `unless_ranks_differ` report in one line."""
        return [(c, rank, value) for c, rx, anchors in self.rank_values
                if not anchors or any(a in text for a in anchors) for rank, value in values_in(rx, text, line_rank)]

    def conditions_in(self, lines: list[str]) -> set[str]:
        """The conditions met by a few lines of text held in memory (quotes, a test's output)."""
        seen = {c for ln in lines for c in self.match_conditions(ln)}
        return seen | {differs_key(c) for c, rx, _ in self.rank_values if ranks_differ(lines, rx)}

    def match_keywords(self, text: str) -> list[tuple[str, str, str]]:
        """(cause, keyword regex, matched words) for each entry keyword found in what a person wrote."""
        out = []
        for cause, kw, rx in self.keywords:
            m = rx.search(text)
            if m:
                out.append((cause, kw, m.group(0)))
        return out


_CACHE: dict[str, Matcher] = {}
_DROPPED: list[frozenset[tuple[str, int]]] = [frozenset()]  # (cause, index) of signatures left out


@contextmanager
def without_signatures(keys: set[tuple[str, int]]):
    """Leave some signatures out of matcher_for's matchers (a cross-validation fold that mimics a log nobody wrote
    a signature from: distdoctor/evals/retrieval_cv.py --drop-own-signatures)."""
    saved = _DROPPED[0]
    _DROPPED[0] = saved | frozenset(keys)
    try:
        yield
    finally:
        _DROPPED[0] = saved


def _without(m: Matcher, drop: frozenset[tuple[str, int]]) -> Matcher:
    """A copy of a matcher without some signatures (its prefilter still reads their lines: a superset)."""
    out = copy.copy(m)
    out.signatures = [s for s in m.signatures if (s.cause, s.index) not in drop]
    out.unanchored = [s for s in m.unanchored if (s.cause, s.index) not in drop]
    return out


def matcher_for(references_root: str | Path | None = None) -> Matcher:
    root = Path(references_root) if references_root else paths.REFERENCES
    key = str(root.resolve())
    if key not in _CACHE:
        entries = load_entries(root)
        if not entries:
            raise KnowledgeError(f"{root}: no reference entries (references/*.md with '### <cause_id> — <title>' headings)")
        _CACHE[key] = Matcher(entries)
    return _without(_CACHE[key], _DROPPED[0]) if _DROPPED[0] else _CACHE[key]
