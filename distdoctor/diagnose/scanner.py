"""Find candidate lines in blocks of a log: one prefilter scan per block, then per-line work only where it hit.

Engines, fastest first, all giving the same candidates: Hyperscan (the `hyperscan` package, x86-64: every
anchor and structural pattern in one multi-pattern database, one scan per block), RE2 (`google-re2`, one
alternation searched match by match), Python's re. DISTDOCTOR_NO_HYPERSCAN=1 / DISTDOCTOR_NO_RE2=1 step down.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from distdoctor.cache import cache_dir, write_atomic
from typing import Iterator

try:
    import re2  # type: ignore[import-not-found]
except ImportError:  # the pure-Python path gives the same results, slower on huge logs
    re2 = None
try:
    import hyperscan  # type: ignore[import-not-found]
except ImportError:  # not built for every platform: RE2 then
    hyperscan = None

from distdoctor.diagnose.matcher import Matcher
from distdoctor.diagnose.sources import MAX_LINE

# After a line holding one of these, the next lines are read too (the agent's summary block gives
# the root-cause rank on a line of its own: "rank : 1 (local_rank: 1)").
FOLLOW = {b"Root Cause": 10, b"Failures:": 40}


def _cache_dir() -> Path:
    """Where compiled prefilters are kept between runs: never inside the project (the skill folder)."""
    override = os.environ.get("DISTDOCTOR_CACHE")
    return Path(override) if override else cache_dir()


def _hyperscan_db(pats: list[bytes]):
    """The Hyperscan database of the patterns: loaded from the cache when the same patterns were compiled
    before (compiling takes ~0.15 s), else compiled and cached. A cache that cannot be read or written is
    ignored."""
    key = hashlib.sha256(b"\0".join([str(getattr(hyperscan, "__version__", "")).encode()] + pats)).hexdigest()[:32]
    path = _cache_dir() / f"prefilter-{key}.hsdb"
    try:
        db = hyperscan.loadb(path.read_bytes(), mode=hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)
        return db
    except Exception:  # absent, unreadable, or built by another Hyperscan: compile
        pass
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=pats, ids=list(range(len(pats))), elements=len(pats), flags=[0] * len(pats))
    write_atomic(path, hyperscan.dumpb(db))
    return db


class Prefilter:
    def __init__(self, matcher: Matcher):
        words = sorted(matcher.prefilter_words)
        pattern = "|".join(re.escape(w) for w in words) + "|" + "|".join(matcher.structural_patterns)
        self.engine = "re"
        self.rx = None
        self.hs = None
        if hyperscan is not None and not os.environ.get("DISTDOCTOR_NO_HYPERSCAN") \
                and not os.environ.get("DISTDOCTOR_NO_RE2"):
            try:
                pats = [re.escape(w).encode("utf-8") for w in words] + \
                       [p.encode("utf-8") for p in matcher.structural_patterns]
                self.hs = _hyperscan_db(pats)
                self.engine = "hyperscan"
            except Exception:  # pragma: no cover - no SSSE3, or a pattern Hyperscan refuses: RE2 then
                self.hs = None
        if self.hs is None and re2 is not None and not os.environ.get("DISTDOCTOR_NO_RE2"):
            try:
                opts = re2.Options()
                opts.max_mem = 64 << 20
                self.rx = re2.compile(pattern.encode("utf-8"), opts)
                self.engine = "re2"
            except Exception:  # pragma: no cover - RE2 refused the pattern: fall back
                self.rx = None
        if self.rx is None:
            self.rx = re.compile(matcher.prefilter_pattern.encode("utf-8"))
        self.unanchored = [re.compile(s.regex.pattern.encode("utf-8")) for s in matcher.unanchored]

    def lines(self, first_line: int, block: bytes | bytearray, state: dict, lo: int = 0,
              hi: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(line number, raw line) for each candidate line of a block of whole lines, block[lo:hi].

        `state` carries, from one block to the next of the same source, how many lines after a
        FOLLOW trigger are still to be read.
        """
        n = len(block) if hi is None else hi
        starts: set[int] = set()
        if self.hs is not None:
            ends: list[int] = []
            self.hs.scan(memoryview(block)[lo:n] if (lo or n != len(block)) else block,
                         match_event_handler=lambda _id, _from, to, _flags, _ctx: ends.append(to))
            last = -1
            for to in sorted(ends):  # a match never holds a newline: its line starts after the newline before it
                to += lo
                if to > last:
                    starts.add(block.rfind(b"\n", lo, to) + 1 or lo)
                    nl = block.find(b"\n", to, n)
                    last = n if nl < 0 else nl
        else:
            search = self.rx.search
            pos = lo
            while pos < n:
                m = search(block, pos, n)
                if m is None:
                    break
                starts.add(block.rfind(b"\n", lo, m.start()) + 1 or lo)
                end = block.find(b"\n", m.end(), n)
                pos = n if end < 0 else end + 1
        for rx in self.unanchored:
            for m in rx.finditer(block, lo, n):
                starts.add(block.rfind(b"\n", lo, m.start()) + 1 or lo)
        pending = state.pop("follow", 0)
        if pending:
            starts.update(_next_lines(block, lo, n, pending, state))
        if not starts:
            return
        todo = sorted(starts)
        done: set[int] = set()
        line_no, counted = first_line, lo
        while todo:
            start = todo.pop(0)
            if start in done:
                continue
            done.add(start)
            line_no += block.count(b"\n", counted, start)
            counted = start
            end = block.find(b"\n", start, n)
            end = n if end < 0 else end
            raw = bytes(block[start:min(end, start + MAX_LINE)])
            for trigger, count in FOLLOW.items():
                if trigger in raw:
                    more = _next_lines(block, end + 1, n, count, state)
                    todo = sorted(set(todo) | set(more))
            yield line_no, raw


def _next_lines(block: bytes | bytearray, pos: int, n: int, count: int, state: dict) -> list[int]:
    """Start offsets of up to `count` lines from `pos` (before `n`); what does not fit is left in state["follow"]."""
    out: list[int] = []
    while len(out) < count and pos < n:
        out.append(pos)
        nl = block.find(b"\n", pos, n)
        pos = n if nl < 0 else nl + 1
    if len(out) < count:
        state["follow"] = max(state.get("follow", 0), count - len(out))
    return out
