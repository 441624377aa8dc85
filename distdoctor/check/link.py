"""The checker's findings on the code lines another tool names: a hung rank's frames (hang doctor), the user
frames of the first failure's traceback (diagnosis). Each file is checked alone, once; nothing is imported.
A file's findings are cached on disk ($XDG_CACHE_HOME/distdoctor/check-findings, keyed by the file's path,
size and mtime and by the checker's own code), so a hang doctor run that looks again loads no libcst."""

from __future__ import annotations

import hashlib
import json
import os
import sysconfig
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from distdoctor.cache import cache_dir, write_atomic

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
    out: list[dict] = []
    for path in sorted(wanted)[:MAX_FILES]:
        for f in file_findings(path):
            if any(abs(f["line"] - n) <= span for n in wanted[path]):
                out.append(f)
    return sorted(out, key=lambda d: (d["path"], d["line"], d["code"]))


@lru_cache(maxsize=1)
def _checker_stamp() -> str:
    """Changes whenever a file of the checker (or the patch helpers it uses) changes."""
    here = Path(__file__).resolve().parent
    files = sorted([*here.rglob("*.py"), *(here.parent / "patching").glob("*.py")])
    return hashlib.sha256(repr([(str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files]).encode()).hexdigest()


def file_findings(path: str) -> list[dict]:
    """Every finding of the checker in one file (checked alone), from the disk cache when the file is unchanged."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    key = [os.path.abspath(path), st.st_size, st.st_mtime_ns, _checker_stamp()]
    cached = cache_dir("check-findings") / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".json")
    try:
        return json.loads(cached.read_text())
    except (OSError, ValueError):
        pass
    try:
        from distdoctor.check.engine import check_paths  # libcst: only on a cache miss
    except ImportError:
        return []
    found = [{"path": f.path, "line": f.line, "col": f.col, "code": f.code, "cause": f.cause, "message": f.message}
             for f in check_paths([path]).findings]
    write_atomic(cached, json.dumps(found).encode())
    return found
