"""The contract every rule module under distdoctor/check/rules/ fulfils.

A rule module defines:
  RULE: RuleInfo                      -- code (DDnnn), cause id of references/taxonomy.yaml, title, severity
  def check(model, out) -> None       -- reads one FileModel, appends Findings (or pending ones) to out
  VALID: list[str]                    -- sources the rule must not report: its documentation of what is fine
  INVALID: list[tuple[str, int]]      -- (source, line) pairs: the rule must report exactly that line
and optionally:
  def finish(results) -> list[Finding] -- a repository-wide step over every file's FileResult (call graph,
                                          "is set_epoch called anywhere")
A pending finding is kept only if no file of the repository set one of its `unless` marks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RuleInfo:
    code: str
    cause: str
    title: str  # one line: what the rule finds
    severity: str = "error"  # error | warning (undecidable statically: a warning)
    prefilter: tuple[str, ...] = ()  # a file is parsed for this rule only if it contains one of these


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    cause: str
    message: str
    severity: str = "error"

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.col, self.code)


@dataclass
class Pending:
    finding: Finding
    unless: frozenset[str]  # dropped when any file of the repository set one of these marks
    when: frozenset[str] = frozenset()  # kept only when some file set one of these marks (empty: always)
    func: str | None = None  # dropped when every call of this function in the repository is rank-guarded


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    marks: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)  # per-rule facts for finish()
    noqa: dict[int, frozenset[str] | None] = field(default_factory=dict)  # line -> codes (None: all)
    file_noqa: frozenset[str] | None = frozenset()  # codes suppressed in the whole file (None: all)
    error: str | None = None

    def add(self, model, node, rule: RuleInfo, message: str) -> Finding:
        line, col = model.pos(node)
        finding = Finding(self.path, line, col, rule.code, rule.cause, message, rule.severity)
        self.findings.append(finding)
        return finding

    def add_pending(self, model, node, rule: RuleInfo, message: str, unless: set[str] | frozenset[str],
                    when: set[str] | frozenset[str] = frozenset(), func: str | None = None) -> None:
        line, col = model.pos(node)
        finding = Finding(self.path, line, col, rule.code, rule.cause, message, rule.severity)
        self.pending.append(Pending(finding, frozenset(unless), frozenset(when), func))
