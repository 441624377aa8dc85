"""Log triage: stream logs, find the first failure, rank causes from the knowledge base.

`diagnose_paths(paths, context)` and `diagnose_text(text, context)` return the `--json` object of
scripts/diagnose.py: {"causes": [{"id", "score", "evidence": [{"file", "line", "text"}]}],
"first_failure": {"rank", "file", "line", "text"} | None, "patch": id | None, ...}.
"""

from __future__ import annotations

import importlib

__all__ = ["diagnose_paths", "diagnose_sources", "diagnose_text"]


def __getattr__(name: str):
    """The engine is imported on first use, so `distdoctor.diagnose.cli --help` needs no third-party module."""
    if name in __all__:
        return getattr(importlib.import_module("distdoctor.diagnose.engine"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
