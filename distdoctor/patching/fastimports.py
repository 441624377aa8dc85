"""libcst's AddImportsVisitor on the module's head, at a fraction of its cost, with the same result.

AddImportsVisitor reads and changes only the module's leading import block (after a docstring) and the
leading lines of the first statement after it; its callbacks are visit_Module, leave_ImportFrom and
leave_Module, and the import gatherer it runs in visit_Module has only leave_Module. Here:

- `add_imports(visitor, tree)` runs it on that head alone, with the statement after the imports stood in
  for by a `pass` line carrying its leading lines (that statement is often a class of thousands of lines),
  walking only the module, its statement lines and their imports (every other callback is a no-op);
- the gatherer's own walk visits the module node alone (`fastwalk.walk_only`);
- `matcher_scans()`: while active, libcst's matcher-decorator scans (`dir()` of the visitor and a
  `getattr` per attribute, run for every new AddImportsVisitor and gatherer) are remembered per class when
  they find nothing, as they do for these classes.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import libcst as cst
import libcst.matchers as m
import libcst.matchers._visitors as _matcher_visitors
from libcst.codemod.visitors import AddImportsVisitor

from distdoctor.patching import fastwalk

_IMPORT_LINE = m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])
_PREAMBLE = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())]) | m.SimpleStatementLine(
    body=[m.Assign(targets=[m.AssignTarget(target=m.Name("__strict__"))])])
# the nodes at which AddImportsVisitor can do anything: the module, its statement lines, their imports
HEAD_NODES = frozenset({cst.Module, cst.SimpleStatementLine, cst.Import, cst.ImportFrom})
_HEAD_PRUNE = fastwalk.AllBut(HEAD_NODES)
try:  # private names of libcst (1.1-1.9); without them libcst's own walks and scans run unchanged
    from libcst.codemod.visitors._add_imports import _GatherTopImportsBeforeStatements
except ImportError:  # pragma: no cover - another libcst
    pass
else:
    fastwalk.walk_only(_GatherTopImportsBeforeStatements, {cst.Module})  # its one callback: leave_Module


def add_imports(visitor: AddImportsVisitor, tree: cst.Module) -> cst.Module:
    """visitor.transform_module(tree)'s result (the visitor runs on the head, see the module docstring)."""
    body = tree.body
    n, first = len(body), None
    for i, stmt in enumerate(body):
        if (i == 0 and m.matches(stmt, _PREAMBLE)) or m.matches(stmt, _IMPORT_LINE):
            continue
        n, first = i + 1, stmt
        break
    head_body = list(body[:n])
    stand_in = None
    if first is not None:
        stand_in = head_body[-1] = cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=first.leading_lines)
    head = fastwalk.transform(tree.with_changes(body=head_body), visitor, prune=_HEAD_PRUNE)
    new_body = list(head.body)
    if stand_in is not None:
        last = new_body[-1]  # AddImportsVisitor keeps the statements after the imports last, in order
        if last is not stand_in and getattr(last, "body", None) is not stand_in.body:
            raise AssertionError("AddImportsVisitor moved the statement after the imports")
        new_body[-1] = first if last is stand_in else first.with_changes(leading_lines=last.leading_lines)
    return head.with_changes(body=[*new_body, *body[n:]])


_NOTHING_FOUND: set[tuple[str, type]] = set()


def _remembered(name: str, scan):
    def cached(obj: object):
        key = (name, type(obj))
        if key in _NOTHING_FOUND:
            return {}
        found = scan(obj)
        if not found:
            _NOTHING_FOUND.add(key)
        return found
    return cached


_SCANS = ("_gather_matchers", "_gather_constructed_visit_funcs", "_gather_constructed_leave_funcs")


@contextmanager
def matcher_scans() -> Iterator[None]:
    """Within: a matcher-decorator scan that found nothing for a class is not run again for it."""
    outer = {name: getattr(_matcher_visitors, name) for name in _SCANS if hasattr(_matcher_visitors, name)}
    for name, scan in outer.items():
        setattr(_matcher_visitors, name, _remembered(name, scan))
    try:
        yield
    finally:
        for name, scan in outer.items():
            setattr(_matcher_visitors, name, scan)
