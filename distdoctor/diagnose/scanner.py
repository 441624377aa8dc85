"""Find candidate lines in blocks of a log: one prefilter search per block (RE2 when the
google-re2 package is installed, Python's re otherwise, or when DISTDOCTOR_NO_RE2=1), then per-line
work only where it hit. Both engines give the same candidates; RE2 is several times faster."""

from __future__ import annotations

import os
import re
from typing import Iterator

try:
    import re2  # type: ignore[import-not-found]
except ImportError:  # the pure-Python path gives the same results, slower on huge logs
    re2 = None

from distdoctor.diagnose.matcher import Matcher
from distdoctor.diagnose.sources import MAX_LINE

# After a line holding one of these, the next lines are read too (the agent's summary block gives
# the root-cause rank on a line of its own: "rank : 1 (local_rank: 1)").
FOLLOW = {b"Root Cause": 10, b"Failures:": 40}


class Prefilter:
    def __init__(self, matcher: Matcher):
        words = sorted(matcher.prefilter_words)
        pattern = "|".join(re.escape(w) for w in words) + "|" + "|".join(matcher.structural_patterns)
        self.engine = "re"
        self.rx = None
        if re2 is not None and not os.environ.get("DISTDOCTOR_NO_RE2"):
            try:
                opts = re2.Options()
                opts.max_mem = 64 << 20
                self.rx = re2.compile(pattern.encode("utf-8"), opts)
                self.engine = "re2"
            except Exception:  # pragma: no cover - RE2 refused the pattern: fall back
                self.rx = None
        if self.rx is None:
            self.rx = re.compile(matcher.prefilter.pattern.encode("utf-8"))
        self.unanchored = [re.compile(s.regex.pattern.encode("utf-8")) for s in matcher.unanchored]

    def lines(self, first_line: int, block: bytes, state: dict) -> Iterator[tuple[int, bytes]]:
        """(line number, raw line) for each candidate line of a block of whole lines."""
        hits: list[int] = []
        search = self.rx.search
        pos = 0
        n = len(block)
        while pos < n:
            m = search(block, pos)
            if m is None:
                break
            start = block.rfind(b"\n", 0, m.start()) + 1
            end = block.find(b"\n", m.end())
            end = n if end < 0 else end
            hits.append(start)
            pos = end + 1
        for rx in self.unanchored:
            for m in rx.finditer(block):
                hits.append(block.rfind(b"\n", 0, m.start()) + 1)
        follow = state.get("follow", 0)
        if follow:
            hits.append(0)
        if not hits:
            if follow:
                state["follow"] = 0
            return
        hits = sorted(set(hits))
        line_no, counted = first_line, 0
        extra: list[int] = []
        i = 0
        follow_until = -1
        if follow:
            # the first `follow` lines of this block continue a block started in the previous one
            p = 0
            for _ in range(follow):
                if p >= n:
                    break
                extra.append(p)
                p = block.find(b"\n", p) + 1 or n
            follow_until = p
            state["follow"] = 0
        hits = sorted(set(hits) | set(extra))
        while i < len(hits):
            start = hits[i]
            i += 1
            line_no += block.count(b"\n", counted, start)
            counted = start
            end = block.find(b"\n", start)
            end = n if end < 0 else end
            raw = block[start:min(end, start + MAX_LINE)]
            for trigger, count in FOLLOW.items():
                if trigger in raw:
                    p = end + 1
                    more = []
                    for _ in range(count):
                        if p >= n:
                            state["follow"] = count - len(more)
                            break
                        more.append(p)
                        p = block.find(b"\n", p) + 1 or n
                    if more:
                        hits = sorted(set(hits[i:]) | set(more))
                        i = 0
            yield line_no, raw
        del follow_until
