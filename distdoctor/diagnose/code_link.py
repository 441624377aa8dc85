"""From the first failure back to the code: the user frames of its traceback (`File "x.py", line N`), read
from the log around the failing line, and the static checker's findings on those lines."""

from __future__ import annotations

import os
import re
from collections import deque

FRAME = re.compile(r'File "(?P<file>[^"]+\.py)", line (?P<line>\d+)')
BEFORE = 120  # a traceback printed before its message, with a few lines of other ranks interleaved
AFTER = 5
MAX_BYTES = 256 * 1024 * 1024  # beyond that, re-reading up to the failing line costs more than it tells
MAX_LINE = 64 * 1024  # a frame line is short; longer lines are cut (memory stays bounded)


def traceback_frames(path: str, line: int, before: int = BEFORE, after: int = AFTER) -> list[tuple[str, int]]:
    """(file, line) of every frame named within the lines around `line` of a plain log file; [] for stdin,
    a compressed or missing file, or one too large to re-read."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_BYTES or path.endswith(".gz"):
            return []
        window: deque[bytes] = deque(maxlen=before + after + 1)
        n = 0
        with open(path, "rb") as fh:
            while n < line + after:
                text = fh.readline(MAX_LINE)  # bounded: a huge line is kept as its first MAX_LINE bytes
                if not text:
                    break
                tail = text
                while len(tail) == MAX_LINE and not tail.endswith(b"\n"):  # skip the rest of a cut line
                    tail = fh.readline(MAX_LINE)
                n += 1
                window.append(text)
    except OSError:
        return []
    return [(m["file"], int(m["line"])) for raw in window
            for m in FRAME.finditer(raw.decode("utf-8", "replace"))]


def checker_findings(result: dict) -> list[dict]:
    """The checker's findings on the user frames of the first failure's traceback (see distdoctor.check.link)."""
    ff = result.get("first_failure") or {}
    if not ff.get("file") or not ff.get("line"):
        return []
    frames = traceback_frames(ff["file"], ff["line"])
    if not frames:
        return []
    from distdoctor.check.link import findings_near

    return findings_near(frames)
