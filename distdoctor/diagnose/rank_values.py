"""Per-rank values for `when_ranks_differ` / `unless_ranks_differ` conditions: what each rank reported
(e.g. its number of batches), in bounded memory, and whether two ranks disagree."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Generic, Iterator, TypeVar

from distdoctor.diagnose.prefixes import split_prefix

W = TypeVar("W")  # where a value was seen: a Line while streaming, a line number for text in memory


class RankValues(Generic[W]):
    """Values each rank reported for each condition regex, with the first place each rank reported one."""

    MAX_RANKS = 4096
    MAX_VALUES = 8

    def __init__(self) -> None:
        self.values: dict[str, dict[int, set[str]]] = defaultdict(dict)
        self.lines: dict[str, dict[int, W]] = defaultdict(dict)  # the first such line of each rank

    def add(self, cond: str, rank: int, value: str, where: W) -> None:
        per_rank = self.values[cond]
        seen = per_rank.get(rank)
        if seen is None:
            if len(per_rank) >= self.MAX_RANKS:
                return
            seen = per_rank[rank] = set()
            self.lines[cond][rank] = where
        if len(seen) < self.MAX_VALUES:
            seen.add(value)

    def differing(self) -> dict[str, list[tuple[int, W, list[str]]]]:
        """Where two ranks reported different values: (rank, its first such line, its values) for both."""
        out = {}
        for cond, per_rank in self.values.items():
            ranks = sorted(per_rank)
            other = next((r for r in ranks[1:] if per_rank[r] != per_rank[ranks[0]]), None)
            if other is not None:
                out[cond] = [(r, self.lines[cond][r], sorted(per_rank[r])) for r in (ranks[0], other)]
        return out


def values_in(rx: re.Pattern[str], text: str, line_rank: int | None) -> Iterator[tuple[int, str]]:
    """(rank, value) for each match in one line: the rank from the regex's rank group, else the line's own
    rank; none without a rank. Interleaved output may hold several ranks' reports on one line."""
    for m in rx.finditer(text):
        named = m.groupdict().get("rank")
        rank = int(named) if named is not None else line_rank
        if rank is not None:
            yield rank, m.group("value")


def ranks_differ(lines: list[str], regex: str | re.Pattern[str]) -> bool:
    """Whether two ranks report different values for a condition regex in text held in memory (quotes, a
    test's output); the rank of an unnamed report comes from the line's prefix."""
    rx = re.compile(regex) if isinstance(regex, str) else regex
    if "value" not in rx.groupindex:
        return False
    found: RankValues[int] = RankValues()
    for n, line in enumerate(lines, 1):
        for rank, value in values_in(rx, line, split_prefix(line)[0]):
            found.add("", rank, value, n)
    return bool(found.differing())
