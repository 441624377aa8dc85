"""Log triage: stream logs, find the first failure, rank causes from the knowledge base.

`diagnose_paths(paths, context)` and `diagnose_text(text, context)` return the `--json` object of
scripts/diagnose.py: {"causes": [{"id", "score", "evidence": [{"file", "line", "text"}]}],
"first_failure": {"rank", "file", "line", "text"} | None, "patch": id | None, ...}.
"""

from distdoctor.diagnose.engine import diagnose_paths, diagnose_sources, diagnose_text

__all__ = ["diagnose_paths", "diagnose_sources", "diagnose_text"]
