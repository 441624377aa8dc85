"""Read the user's source at a reported frame (never importing it): the blocks that enclose a line — branches
(and whether their test is on the rank), loops, functions and their decorators.

One libcst pass per file (source_scan.py) gives the spans of all its blocks; they are cached in memory and on
disk ($XDG_CACHE_HOME/distdoctor/hang-source, keyed by path, size and mtime), so a second look at the same
code during a hang does not even load libcst.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from distdoctor.cache import cache_dir, write_atomic


@dataclass(frozen=True)
class Block:
    kind: str  # if | for | while | def
    file: str
    line: int  # the header's line
    header: str  # e.g. "if rank == 0:", "for batch in batches:", "def save(...)"
    on_rank: bool = False  # an `if` whose test reads the rank, or a def with a rank-zero-only decorator
    branch: str = ""  # for an if: "body" or "else" (which side the line is on)
    forever: bool = False  # a while whose test is constant (`while True:`): it ends only by a break or return

    @property
    def key(self) -> tuple[str, int]:
        return self.file, self.line


SCAN_VERSION = 6  # bump when source_scan records more: older cache entries are then read again


def _cache_dir() -> Path:
    return cache_dir("hang-source")


@lru_cache(maxsize=512)
def _spans(file: str) -> tuple[dict, ...] | None:
    """The block spans of a file, None when it cannot be read or parsed here."""
    try:
        st = os.stat(file)
    except OSError:
        return None
    stamp = [st.st_size, st.st_mtime_ns, SCAN_VERSION]
    cached = _cache_dir() / (hashlib.sha256(os.path.abspath(file).encode()).hexdigest()[:32] + ".json")
    try:
        data = json.loads(cached.read_text())
        if data.get("stamp") == stamp:
            return tuple(data["spans"])
    except (OSError, ValueError, AttributeError):
        pass
    from distdoctor.hang import source_scan  # libcst: only on a cache miss
    try:
        spans = source_scan.spans(Path(file).read_bytes())
    except Exception:  # noqa: BLE001 - unreadable or unparsable (libcst.ParserSyntaxError): no source answer
        return None
    write_atomic(cached, json.dumps({"file": os.path.abspath(file), "stamp": stamp, "spans": spans}).encode())
    return tuple(spans)


@lru_cache(maxsize=4096)
def enclosing(file: str | None, line: int | None) -> tuple[Block, ...]:
    """The blocks around file:line, outermost first; () when the file cannot be read or parsed here."""
    spans = _spans(file) if file and line else None
    if not spans:
        return ()
    out = []
    around = (s for s in spans if s["start"] <= line <= s["end"] and s["kind"] in ("if", "for", "while", "def"))
    for s in sorted(around, key=lambda s: (s["start"], -s["end"])):
        branch = ("body" if s["body"][0] <= line <= s["body"][1] else "else") if s["kind"] == "if" else ""
        out.append(Block(s["kind"], file, s["line"], s["header"], s["on_rank"], branch, bool(s.get("forever"))))
    return tuple(out)


def _function_start(spans: tuple[dict, ...], line: int) -> int:
    """The first line of the innermost function around `line` (0: the module)."""
    return max((s["start"] for s in spans if s["kind"] == "def" and s["start"] <= line <= s["end"]), default=0)


def _own(spans: tuple[dict, ...], s: dict, line: int) -> bool:
    """Whether span s lies in the innermost function around `line` itself, not in a function defined inside it
    (or, for a line at module level, not in any function)."""
    return _function_start(spans, s["start"]) == _function_start(spans, line)


def exit_guards(file: str | None, line: int | None, any_test: bool = False) -> tuple[Block, ...]:
    """The `if`s on the rank (any_test: on anything, data too) that end in return/continue/break/raise, above
    file:line in the innermost function around it (not in a function nested in it) and not enclosing it
    (`if rank != 0: return` before a barrier): ranks that took them never got to the line."""
    spans = _spans(file) if file and line else None
    if not spans:
        return ()
    lo = _function_start(spans, line)
    return tuple(Block("if", file, s["line"], s["header"], s["on_rank"], "body") for s in spans
                 if s["kind"] == "if" and s.get("exits") and (s["on_rank"] or any_test) and lo <= s["start"]
                 and s["end"] < line and _own(spans, s, line))


def in_function_of(file: str | None, line: int | None, other: int | None) -> bool:
    """Whether line `other` of file lies in the innermost function around `line` (the module counts as one)."""
    spans = _spans(file) if file and line and other else None
    if not spans:
        return False
    start = _function_start(spans, line)
    end = max((s["end"] for s in spans if s["kind"] == "def" and s["start"] == start), default=10 ** 9)
    return start <= other <= end and _function_start(spans, other) == start


def swallowing_handlers(file: str | None, line: int | None, ignore: tuple[str, ...] = ()) -> tuple[Block, ...]:
    """The except clauses of the innermost function around file:line whose try body holds the line and that do
    not re-raise: a rank that raised in that body went on past the try, without the line's call. ignore: names
    of exceptions whose handlers do not count (StopIteration: the end of the data, not an error)."""
    spans = _spans(file) if file and line else None
    if not spans:
        return ()
    return tuple(Block("except", file, s["line"], s["header"], False, "exit") for s in spans
                 if s["kind"] == "except" and s.get("tried") and s["tried"][0] <= line <= s["tried"][1]
                 and s.get("exits") != "raise" and _own(spans, s, line)
                 and not set(s.get("catches") or ()) & set(ignore))


def _directly_in_loop(file: str | None, loop_line: int | None) -> list[dict]:
    """The spans inside the loop whose header is at loop_line and not inside a loop or def nested in it (a
    `continue` or `break` there is that loop's); [] when the file or the loop is not known."""
    spans = _spans(file) if file and loop_line else None
    loop = next((s for s in spans if s["kind"] in ("for", "while") and s["line"] == loop_line), None) if spans else None
    if loop is None:
        return []
    inner = [s for s in spans if s["kind"] in ("for", "while", "def") and s is not loop
             and loop["start"] <= s["start"] and s["end"] <= loop["end"]]
    return [s for s in spans if loop["start"] < s["start"] and s["end"] <= loop["end"]
            and not any(i["start"] <= s["start"] and s["end"] <= i["end"] for i in inner)]


def skipping_handlers(file: str | None, loop_line: int | None, before: int | None = None) -> tuple[Block, ...]:
    """The except clauses inside the loop whose header is at loop_line that end in `continue` (of that loop, not
    of a loop nested in it), above line `before` when given: a rank that raised there skipped the rest of that
    pass, and the collectives in it."""
    return tuple(Block("except", file, s["line"], s["header"], False, "exit")
                 for s in _directly_in_loop(file, loop_line)
                 if s["kind"] == "except" and s.get("exits") == "continue" and (before is None or s["start"] < before))


def loop_exits(file: str | None, loop_line: int | None) -> tuple[Block, ...]:
    """The `if`s inside the loop whose header is at loop_line that end in `break` (of that loop, not of a loop
    nested in it): the per-rank test (a step limit, a time budget) that let some ranks leave the loop first."""
    return tuple(Block("if", file, s["line"], s["header"], s["on_rank"], "exit")
                 for s in _directly_in_loop(file, loop_line) if s["kind"] == "if" and s.get("exits") == "break")


def with_bodies(file: str | None, line: int | None) -> tuple[Block, ...]:
    """The `with` statements whose body holds file:line, in its own function, outermost first."""
    spans = _spans(file) if file and line else None
    if not spans:
        return ()
    return tuple(Block("with", file, s["line"], s["header"], s["on_rank"], "body") for s in spans
                 if s["kind"] == "with" and s["body"][0] <= line <= s["body"][1] and _own(spans, s, line))


def cleanup_clauses(file: str | None, line: int | None) -> tuple[tuple[Block, tuple[int, int]], ...]:
    """The except and finally clauses of the innermost function around file:line whose body holds the line, each with
    the lines of the try body it belongs to: a rank at the line has left that try body (it raised, or finished)."""
    spans = _spans(file) if file and line else None
    if not spans:
        return ()
    return tuple((Block(s["kind"], file, s["line"], s["header"], False, "body"), tuple(s["tried"])) for s in spans
                 if s["kind"] in ("except", "finally") and s.get("tried") and s["body"][0] <= line <= s["body"][1]
                 and _own(spans, s, line))


def loop_test_sets(file: str | None, loop_line: int | None) -> tuple[Block, ...]:
    """The assignments directly in the `while` (with a condition) whose header is at loop_line that bind a name its
    test reads (`converged = abs(delta) < tol` under `while not converged:`): the value each rank leaves the loop
    on, computed by that rank."""
    spans = _spans(file) if file and loop_line else None
    loop = next((s for s in spans if s["kind"] == "while" and s["line"] == loop_line), None) if spans else None
    if loop is None or loop.get("forever"):
        return ()
    reads = set(loop.get("reads") or ())
    return tuple(Block("assign", file, s["line"], s["header"]) for s in _directly_in_loop(file, loop_line)
                 if s["kind"] == "assign" and reads & set(s.get("names") or ()))


def locks_at(file: str | None, line: int | None) -> tuple[str, ...]:
    """The locks taken at file:line: the items of a `with` whose header is there, the X of an `X.acquire()` call."""
    spans = _spans(file) if file and line else None
    if not spans:
        return ()
    return tuple(i for s in spans if s["kind"] == "with" and s["line"] == line for i in s.get("items") or ()) + \
        tuple(s["lock"] for s in spans if s["kind"] == "acquire" and s["line"] == line)


def unreleased_acquires(file: str | None, lock: str) -> tuple[Block, ...]:
    """The `lock.acquire()` calls of a file in functions that release the lock in no `finally:` (and in no `with`):
    an exception between the acquire and the release leaves the lock held by a thread that is gone."""
    spans = _spans(file) if file else None
    if not spans:
        return ()
    finals = [s for s in spans if s["kind"] == "finally"]

    def safe(acq: dict) -> bool:
        return any(s["kind"] == "release" and s["lock"] == lock and _own(spans, s, acq["line"])
                   and any(f["body"][0] <= s["line"] <= f["body"][1] for f in finals) for s in spans)
    return tuple(Block("acquire", file, s["line"], s["header"]) for s in spans
                 if s["kind"] == "acquire" and s["lock"] == lock and not safe(s))


def debug_call(file: str | None, line: int | None) -> Block | None:
    """The debugger call (breakpoint(), pdb.set_trace()) nearest above or at file:line in the same function."""
    spans = _spans(file) if file and line else None
    if not spans:
        return None
    lo = _function_start(spans, line)
    calls = [s for s in spans if s["kind"] == "debug" and lo <= s["line"] <= line]
    last = max(calls, key=lambda s: s["line"], default=None)
    return Block("debug", file, last["line"], last["header"]) if last else None


def line_text(file: str | None, line: int | None) -> str:
    """The stripped text of one line of a file (for people; never parsed from)."""
    try:
        return Path(file).read_text(errors="replace").splitlines()[line - 1].strip() if file and line else ""
    except (OSError, IndexError):
        return ""
