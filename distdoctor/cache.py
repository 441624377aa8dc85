"""The per-user cache shared by the tools ($XDG_CACHE_HOME/distdoctor, else ~/.cache/distdoctor): never the
skill folder. Writes are atomic (a temporary file renamed into place); a cache that cannot be written is skipped."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """$XDG_CACHE_HOME/distdoctor/<parts...> (~/.cache when XDG_CACHE_HOME is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "distdoctor", *parts)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder; an OSError (read-only home, full
    disk) leaves no cache entry and is not an error: the caller's answer is the same without it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass
