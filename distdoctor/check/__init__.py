"""Static hazard checker: rules over a libcst model of the code (distdoctor/check/rules/), before launch.

`check_paths(roots)` checks repositories; `findings_at(path, line)` answers the hang doctor's and the
diagnosis's question "does the checker have a finding on the line this stack or log names?".
"""

from __future__ import annotations

import os

from distdoctor.check.base import Finding


def findings_at(path: str, line: int | None = None, repo: str | None = None) -> list[Finding]:
    """The checker's findings in `path` (on `line` when given). `repo` (default: the file's folder) is the
    tree the call graph and the repository-wide rules look at."""
    from distdoctor.check.engine import check_paths

    report = check_paths([repo or os.path.dirname(os.path.abspath(path)) or "."])
    real = os.path.realpath(path)
    return [f for f in report.findings
            if os.path.realpath(f.path) == real and (line is None or f.line == line)]


def check_paths(*args, **kwargs):
    from distdoctor.check.engine import check_paths as run

    return run(*args, **kwargs)
