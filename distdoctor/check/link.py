"""The checker's findings on the code lines another tool names: a hung rank's frames (hang doctor), the user
frames of the first failure's traceback (diagnosis). Each file is checked alone, once; nothing is imported."""

from __future__ import annotations

import os
import sysconfig
from collections import defaultdict
from typing import Iterable

# where Python's own modules and installed packages live: frames there are library code, not the user's
_LIBRARY_ROOTS = tuple({os.path.realpath(p) for p in (sysconfig.get_paths().get("purelib"),
                                                      sysconfig.get_paths().get("stdlib")) if p})
MAX_FILES = 8  # a traceback or a set of hung ranks names few user files; never walk a whole tree from here


def is_user_file(path: str | None) -> bool:
    """A Python file on this machine that is not part of an installed package or of Python itself."""
    if not path or not path.endswith(".py") or not os.path.isfile(path):
        return False
    real = os.path.realpath(path)
    parts = real.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return not any(real.startswith(root + os.sep) for root in _LIBRARY_ROOTS)


def findings_near(places: Iterable[tuple[str, int | None]], span: int = 0) -> list[dict]:
    """Findings within `span` lines of the named (path, line) places, as dicts (path, line, col, code, cause,
    message); [] when no place is a user file or the checker cannot run here (libcst missing)."""
    wanted: dict[str, set[int]] = defaultdict(set)
    for path, line in places:
        if line is not None and is_user_file(path):
            wanted[os.path.realpath(path)].add(int(line))
    if not wanted:
        return []
    try:
        from distdoctor.check.engine import check_paths
    except ImportError:
        return []
    out: list[dict] = []
    for path in sorted(wanted)[:MAX_FILES]:
        report = check_paths([path])
        for f in report.findings:
            if any(abs(f.line - n) <= span for n in wanted[path]):
                out.append({"path": f.path, "line": f.line, "col": f.col, "code": f.code, "cause": f.cause,
                            "message": f.message})
    return sorted(out, key=lambda d: (d["path"], d["line"], d["code"]))
