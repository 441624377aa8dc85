"""The contract every patch module under patches/ fulfils.

A patch module defines:
  PATCH: PatchInfo                       -- metadata (id, cause, title, risk, env var, prefilter)
  class Transformer(PatchCommand)        -- a libcst codemod; it calls self.record(node, what)
  VALID: list[str]                       -- sources the patch must leave byte-identical
  INVALID: list[tuple[str, str]]         -- (before, after) pairs the patch must produce exactly
and optionally:
  def screen(tree: ast.Module) -> bool   -- a cheap check on Python's own parse of a file that passed
                                            the prefilter; False skips libcst for this patch (the engine
                                            parses with `ast` once for all screens: ~10x cheaper)

The engine (distdoctor/patching/engine.py) resolves metadata once per file, and all patches analyse
that one tree: their visit_/leave_ methods run together in one traversal, in registry order at each
node. So a Transformer must return `updated_node` itself (the same object) where it changes nothing;
a rewrite counts only when the patch record()s it, and record() lines are lines of the original file.
When a patch rewrites a node that contains (or is) another patch's rewrite, the engine patches that
file one patch at a time instead (as if each ran on the previous one's output), unless one of the two
names the other in COMPOSES_WITH: it then handles the other's rewrite in the same pass itself.
Metadata a patch does not declare can be resolved on demand (distdoctor.patching.cstutil.lookup);
declared providers are resolved when first asked, so a patch that finds nothing pays for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import libcst as cst
from libcst.codemod import Codemod, CodemodContext, VisitorBasedCodemodCommand
from libcst.matchers._visitors import _gather_matchers
from libcst.metadata import PositionProvider


@dataclass(frozen=True)
class PatchInfo:
    id: str
    cause: str  # a cause id of references/taxonomy.yaml
    title: str  # one line
    risk: str  # what could go wrong when this rewrite is applied
    env_var: str | None = None  # the environment variable the rewrite introduces, if any
    prefilter: tuple[str, ...] = ()  # a file is parsed only if it contains one of these substrings


@dataclass(frozen=True)
class Change:
    line: int
    patch: str
    what: str


@dataclass
class PatchOptions:
    env_prefix: str = "DISTDOCTOR"  # for <PREFIX>_FORCE_SDPA and similar switches


_PLAIN: set[type] = set()  # PatchCommand classes found to use no matcher decorators


class PatchCommand(VisitorBasedCodemodCommand):
    """Base codemod: subclasses set INFO and call record() for each rewrite they make."""

    INFO: PatchInfo
    METADATA_DEPENDENCIES = (PositionProvider,)
    COMPOSES_WITH: frozenset[str] = frozenset()  # patch ids whose rewrites of the same nodes it builds on

    # No patch uses libcst's matcher decorators (@m.visit, @m.call_if_inside, ...): the plain transformer
    # dispatch skips their per-node bookkeeping, a fifth of the time on big files. __init__ refuses a
    # subclass that uses them, so they cannot be silently ignored.
    on_visit = cst.CSTTransformer.on_visit
    on_leave = cst.CSTTransformer.on_leave
    on_visit_attribute = cst.CSTTransformer.on_visit_attribute
    on_leave_attribute = cst.CSTTransformer.on_leave_attribute

    def __init__(self, context: CodemodContext, options: PatchOptions | None = None) -> None:
        if type(self) in _PLAIN:
            # libcst's MatcherDecoratableTransformer.__init__ scans every method of the class for matcher
            # decorators (~15 ms, per instance: one per patch per file); this class was scanned once
            Codemod.__init__(self, context)
            self._matchers, self._extra_visit_funcs, self._extra_leave_funcs = None, {}, {}  # as scanned
        else:
            super().__init__(context)
            if self._extra_visit_funcs or self._extra_leave_funcs or _gather_matchers(self):
                raise TypeError(f"{type(self).__name__}: matcher decorators are not supported in patches")
            _PLAIN.add(type(self))
        self.options = options or PatchOptions()
        self.changes: list[Change] = context.scratch.setdefault("distdoctor_changes", [])

    def record(self, node: cst.CSTNode, what: str) -> None:
        """Note a rewrite at the (original) node's first line."""
        try:
            line = self.get_metadata(PositionProvider, node).start.line
        except KeyError:  # not declared: resolve positions now, only because something changed
            wrapper = self.context.wrapper
            try:
                line = wrapper.resolve(PositionProvider)[node].start.line if wrapper is not None else 0
            except KeyError:
                line = 0
        self.changes.append(Change(line, self.INFO.id, what))


class GuardAwareCommand(PatchCommand):
    """A patch that leaves code alone under a test that already decides its question (CUDA present, an
    accelerator...): `self.guarded` is the depth of such enclosing `if` statements and conditional
    expressions. Subclasses set `guard_depth(test) -> int` (1 when the test counts, else 0)."""

    guard_depth: Callable[[cst.BaseExpression], int]

    def __init__(self, context: CodemodContext, options: PatchOptions | None = None) -> None:
        super().__init__(context, options)
        self.guarded = 0

    def visit_If(self, node: cst.If) -> None:
        self.guarded += type(self).guard_depth(node.test)

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        self.guarded -= type(self).guard_depth(original_node.test)
        return updated_node

    def visit_IfExp(self, node: cst.IfExp) -> None:
        self.guarded += type(self).guard_depth(node.test)

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.BaseExpression:
        self.guarded -= type(self).guard_depth(original_node.test)
        return updated_node


class InPlaceRewrite(GuardAwareCommand):
    """A guard-aware patch that puts a conditional expression where an expression was: `self.bare` holds the
    ids of the expressions that stand alone (an argument, an assigned or returned value), which need no
    parentheses around what replaces them (`in_place`)."""

    def __init__(self, context: CodemodContext, options: PatchOptions | None = None) -> None:
        super().__init__(context, options)
        self.bare: set[int] = set()

    def visit_Arg(self, node: cst.Arg) -> None:
        self.bare.add(id(node.value))

    def visit_Assign(self, node: cst.Assign) -> None:
        self.bare.add(id(node.value))

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.bare.add(id(node.value))

    def in_place(self, original: cst.CSTNode, new: cst.BaseExpression) -> cst.BaseExpression:
        """`new` to stand where `original` was: parenthesized unless `original` stood alone."""
        if id(original) in self.bare:
            return new
        return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
