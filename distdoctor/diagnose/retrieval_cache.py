"""The retrieval index's inputs, prepared once and kept in the user's cache: every known document (knowledge-base
entries and train corpus cases), its error lines read as structural failures, and its BM25 tokens.

Preparing them reads ~800 documents and abstracts every line: about 0.7 s of a 1.1 s diagnosis of a small log.
The cache entry ($XDG_CACHE_HOME/distdoctor/retrieval/<key>.json) is keyed by what the preparation reads and runs:
the size and modification time of every references file, of every TRAIN corpus file (held-out files are never
opened, not even stat'ed) and of the diagnosis code that reads them. A changed input gives another key; an entry
that cannot be read or written is rebuilt and skipped, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from distdoctor.cache import cache_dir, write_atomic

FORMAT = 1  # bump when the stored layout changes
KEEP = 4    # cache entries kept (checkouts, corpus folders)
_CODE = ("diagnose", "knowledge.py", "corpus.py")  # the code (relative to the package) that prepares documents


def _stats(files: list[Path]) -> list[str]:
    out = []
    for f in sorted(files):
        try:
            st = f.stat()
        except OSError:
            continue
        out.append(f"{f}\0{st.st_size}\0{st.st_mtime_ns}")
    return out


def _train_files(corpus_root: Path) -> list[Path]:
    from distdoctor.corpus import split_of

    if not corpus_root.is_dir():
        return []
    out = []
    for entry in os.scandir(corpus_root):
        name = entry.name
        stem = name[:-len(".meta.yaml")] if name.endswith(".meta.yaml") else name[:-len(".log")] \
            if name.endswith(".log") else None
        if stem is None or split_of(stem) == "train":
            out.append(Path(entry.path))
    return out


def key(references_root: str, corpus_root: str | None) -> str:
    """What the prepared documents depend on, as a hex digest."""
    from distdoctor.corpus import CORPUS

    pkg = Path(__file__).resolve().parents[1]
    code = [p for part in _CODE for p in ((pkg / part).glob("*.py") if (pkg / part).is_dir() else [pkg / part])]
    refs = [p for p in Path(references_root).rglob("*") if p.is_file()]
    parts = [f"format {FORMAT}", references_root, str(corpus_root)] + _stats(code) + _stats(refs) \
        + _stats(_train_files(Path(corpus_root) if corpus_root else CORPUS))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def load(digest: str) -> dict | None:
    """The prepared documents of this key, or None (absent, unreadable, or of another layout)."""
    try:
        data = json.loads(cache_dir("retrieval", f"{digest}.json").read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def store(digest: str, data: dict) -> None:
    """Keep this key's documents; entries of older keys beyond the KEEP newest are removed."""
    folder = cache_dir("retrieval")
    write_atomic(folder / f"{digest}.json", json.dumps({"format": FORMAT, **data}).encode())
    try:
        old = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)[KEEP:]
        for p in old:
            p.unlink()
    except OSError:
        pass
