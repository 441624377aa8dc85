"""libcst traversals that do not rebuild the tree: the same callbacks, in the same order, as `node.visit`.

libcst's `CSTNode.visit` rebuilds every node it descends into (`_visit_and_replace_children` constructs
and validates a copy), for a transformer and for a read-only CSTVisitor alike, where the copy is thrown
away. On torch's 11k-line distributed test harness that is most of the cost of the scope analysis and of
the patches' shared traversal. Here:

- `visitors()`: while active, `node.visit(v)` for a CSTVisitor `v` walks the children without copying
  (the scope and expression-context providers, the patches' own visitors);
- `transform(module, t)`: a CSTTransformer's traversal that copies a node only when one of its children
  was replaced, by libcst's own `_visit_and_replace_children` fed the replacements (so removals,
  flattening and validation are libcst's). Where nothing changed, `updated_node` is the original node.
- `children(node)`: `node.children` without constructing a copy of `node`.

The order of a node's children is the order in which its `_visit_and_replace_children` visits its
fields, recorded once per node class (and per presence of the one conditionally visited field).
"""

from __future__ import annotations

from contextlib import contextmanager
from inspect import getattr_static
from types import FunctionType
from typing import Iterator

import libcst as cst
from libcst import CSTNode, CSTValidationError, CSTVisitor, FlattenSentinel, RemovalSentinel
from libcst.metadata.expression_context_provider import ExpressionContextVisitor
from libcst.metadata.base_provider import BaseMetadataProvider
from libcst.metadata.scope_provider import ScopeVisitor

try:  # a private name of libcst (1.1-1.9): without it the scope visitor walks the plain way
    from libcst.metadata.scope_provider import _ASSIGNMENT_LIKE_NODES
except ImportError:  # pragma: no cover - another libcst
    _ASSIGNMENT_LIKE_NODES = None

_ORIGINAL_VISIT = CSTNode.visit

# classes whose _visit_and_replace_children visits a field only when it is not None
_CONDITIONAL: dict[type, str] = {
    t: "format_spec" for t in (getattr(cst, "FormattedStringExpression", None),
                               getattr(cst, "TemplatedStringExpression", None)) if t is not None
}
_ORDER: dict[object, tuple[str, ...]] = {}


def _formatting() -> frozenset[type]:
    """Whitespace, comments, punctuation and operator tokens: nodes whose subtrees hold nothing else."""
    punctuation = {cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.Newline, cst.TrailingWhitespace,
                   cst.EmptyLine, cst.Comment, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual,
                   cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
                   cst.LeftCurlyBrace, cst.RightCurlyBrace}
    bases = (cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp, cst.BaseAugOp)
    operators = {t for t in vars(cst).values() if isinstance(t, type) and issubclass(t, bases)
                 and not t.__name__.startswith("Base")}
    return frozenset(punctuation | operators)


FORMATTING = _formatting()
FORMATTING_NAMES = frozenset(t.__name__ for t in FORMATTING)
NOTHING: frozenset[type] = frozenset()
# nodes whose fields hold only FORMATTING nodes or plain values: with FORMATTING pruned, a visit there
# calls the node's own visit_X / leave_X and nothing below it
LEAVES: frozenset[type] = frozenset({cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
                                     cst.Ellipsis, cst.Pass, cst.Break, cst.Continue})


class AllBut:
    """A prune set holding every class but the ones in `keep` (`type(node) in prune` for any node)."""

    __slots__ = ("keep",)

    def __init__(self, keep) -> None:
        self.keep = frozenset(keep)

    def __contains__(self, kind: object) -> bool:
        return kind not in self.keep


def walk_only(visitor_class: type, keep) -> None:
    """Read-only walks of visitor_class (under visitors()) visit only nodes of the classes in `keep` and
    their kept descendants: for a visitor the caller knows does nothing at any other node."""
    _PRUNE[visitor_class] = AllBut(keep)


def unhandled_leaves(names) -> frozenset[type]:
    """The LEAVES classes for which no visit_X / leave_X (nor visit_X_field) method is among `names`: a
    traversal that already skips FORMATTING may skip those nodes too, nothing would be called there."""
    handled = {name.split("_")[1] for name in names if name.startswith(("visit_", "leave_"))}
    return frozenset(t for t in LEAVES if t.__name__ not in handled)


def handles_formatting(names) -> bool:
    """Whether some visit_X / leave_X (or visit_X_field) method among `names` is for a FORMATTING node class:
    a traversal that skips those nodes would then miss a callback."""
    return any(name.split("_")[1] in FORMATTING_NAMES for name in names if name.startswith(("visit_", "leave_")))


class _Recorder(cst.CSTTransformer):
    """Notes the fields a node's _visit_and_replace_children visits, without descending into them."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[str] = []

    def on_visit(self, node: CSTNode) -> bool:
        return False

    def on_leave(self, original_node: CSTNode, updated_node: CSTNode) -> CSTNode:
        return updated_node

    def on_visit_attribute(self, node: CSTNode, attribute: str) -> None:
        self.fields.append(attribute)

    def on_leave_attribute(self, original_node: CSTNode, attribute: str) -> None:
        return None


def fields(node: CSTNode) -> tuple[str, ...]:
    """The names of node's fields in the order libcst visits them (children and attribute callbacks)."""
    kind = type(node)
    cond = _CONDITIONAL.get(kind)
    key = kind if cond is None else (kind, getattr(node, cond) is None)
    order = _ORDER.get(key)
    if order is None:
        recorder = _Recorder()
        node._visit_and_replace_children(recorder)
        order = _ORDER[key] = tuple(recorder.fields)
    return order


def children(node: CSTNode) -> list[CSTNode]:
    """node.children (its direct children in source order), without copying node."""
    out: list[CSTNode] = []
    for name in _ORDER.get(type(node)) or fields(node):
        value = getattr(node, name)
        kind = type(value)
        if kind is tuple or kind is list:
            out.extend(value)
        elif _IS_NODE.get(kind) or (kind not in _IS_NODE and _is_node(kind)):
            out.append(value)
    return out


_IS_NODE: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    found = _IS_NODE.get(kind)
    if found is None:
        found = _IS_NODE[kind] = issubclass(kind, CSTNode)
    return found


_PLANS: dict[type, object] = {}
_STUBS = ("libcst._typed_visitor", "libcst._visitors")  # libcst's no-op visit_X_attr stubs for every field


def attribute_plan(visitor: object):
    """Which per-attribute callbacks the visitor needs: None (it has none of its own), True (it has its own
    on_visit_attribute/on_leave_attribute: every field) or {node class name: field names} for its own
    visit_X_field / leave_X_field methods. libcst's default callbacks call exactly those methods, and the
    stubs it inherits for every other field do nothing."""
    kind = type(visitor)
    if kind in _PLANS:
        return _PLANS[kind]
    base = cst.CSTTransformer if isinstance(visitor, cst.CSTTransformer) else CSTVisitor
    plan: object = None
    if kind.on_visit_attribute is not base.on_visit_attribute or kind.on_leave_attribute is not base.on_leave_attribute:
        plan = True
    else:
        own: dict[str, set[str]] = {}
        for klass in kind.__mro__:
            if klass.__module__.startswith(_STUBS):
                continue
            for name in vars(klass):
                parts = name.split("_", 2)
                if (len(parts) == 3 and parts[0] in ("visit", "leave") and parts[1][:1].isupper()
                        and isinstance(getattr(cst, parts[1], None), type)):
                    own.setdefault(parts[1], set()).add(parts[2])
        plan = {k: frozenset(v) for k, v in own.items()} or None
    _PLANS[kind] = plan
    return plan


def _walk(node: CSTNode, visitor: CSTVisitor, plan, prune: frozenset[type]) -> None:
    if visitor.on_visit(node):
        names = _ORDER.get(type(node)) or fields(node)
        hooks = None if plan is None else names if plan is True else plan.get(type(node).__name__)
        for name in names:
            value = getattr(node, name)
            hook = hooks is not None and name in hooks
            if hook:
                visitor.on_visit_attribute(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for child in value:
                    if type(child) not in prune:
                        _walk(child, visitor, plan, prune)
            elif kind not in prune and (_IS_NODE.get(kind) or (kind not in _IS_NODE and _is_node(kind))):
                _walk(value, visitor, plan, prune)
            if hook:
                visitor.on_leave_attribute(node, name)
    visitor.on_leave(node)


def _dispatch_walk(node: CSTNode, visitor: CSTVisitor, plan, prune: frozenset[type], visits: dict,
                   leaves: dict, scopes: dict | None) -> None:
    """_walk for a visitor whose on_visit/on_leave are CSTVisitor's own (or ScopeVisitor's, `scopes` not
    None): their work done here, with each visit_X / leave_X looked up once per node class (`visits`,
    `leaves`; None for libcst's no-op stubs, which are not called). ScopeVisitor.on_leave's
    `isinstance(node, _ASSIGNMENT_LIKE_NODES)` (abstract-class checks against 18 classes, per node) is
    answered per node class too (`scopes`)."""
    kind = type(node)
    fn = visits[kind] if kind in visits else _method(visitor, "visit_", kind, visits)
    if fn is None or fn(visitor, node) is not False:
        names = _ORDER.get(kind) or fields(node)
        hooks = None if plan is None else names if plan is True else plan.get(kind.__name__)
        for name in names:
            value = getattr(node, name)
            hook = hooks is not None and name in hooks
            if hook:
                visitor.on_visit_attribute(node, name)
            vkind = type(value)
            if vkind is tuple or vkind is list:
                for child in value:
                    if type(child) not in prune:
                        _dispatch_walk(child, visitor, plan, prune, visits, leaves, scopes)
            elif vkind not in prune and (_IS_NODE.get(vkind) or (vkind not in _IS_NODE and _is_node(vkind))):
                _dispatch_walk(value, visitor, plan, prune, visits, leaves, scopes)
            if hook:
                visitor.on_leave_attribute(node, name)
    if scopes is not None:  # ScopeVisitor.on_leave: set_metadata, the assignment count, CSTVisitor.on_leave
        scope = visitor.scope
        visitor.provider._computed[node] = scope
        like = scopes.get(kind)
        if like is None:
            like = scopes[kind] = issubclass(kind, _ASSIGNMENT_LIKE_NODES)
        if like:
            scope._assignment_count += 1
    fn = leaves[kind] if kind in leaves else _method(visitor, "leave_", kind, leaves)
    if fn is not None:
        fn(visitor, node)


def _method(visitor: CSTVisitor, prefix: str, kind: type, table: dict):
    """The function `getattr(visitor, prefix + kind.__name__, None)` calls, or None when there is none or
    it is one of libcst's no-op stubs (recorded in table, per visitor class)."""
    name = prefix + kind.__name__
    fn = getattr(type(visitor), name, None)
    if fn is not None and getattr(fn, "__module__", "").startswith(_STUBS):
        fn = None
    elif fn is not None and not isinstance(getattr_static(type(visitor), name), FunctionType):  # a static method...
        fn = lambda v, node: getattr(v, name)(node)  # noqa: E731 - called as the plain functions are
    table[kind] = fn
    return fn


_DISPATCH: dict[type, tuple[dict, dict, dict | None] | None] = {}
_ASSIGNMENT_SCOPES: dict[type, bool] = {}


def _dispatch(visitor: CSTVisitor):
    """(visits, leaves, scopes) tables for _dispatch_walk, or None when the visitor's class has on_visit /
    on_leave of its own (other than ScopeVisitor's) or its instance holds visit_/leave_ attributes."""
    kind = type(visitor)
    if kind not in _DISPATCH:
        # ScopeVisitor.on_leave: `self.provider.set_metadata(node, self.scope)`, a count of assignment-like
        # nodes, CSTVisitor.on_leave; done by _dispatch_walk while set_metadata is the plain one
        scope_leave = kind.on_leave is ScopeVisitor.on_leave and _ASSIGNMENT_LIKE_NODES is not None
        ok = kind.on_visit is CSTVisitor.on_visit and (kind.on_leave is CSTVisitor.on_leave or scope_leave)
        _DISPATCH[kind] = ({}, {}, _ASSIGNMENT_SCOPES if scope_leave else None) if ok else None
    found = _DISPATCH[kind]
    if found is None or visitor is _CHECKED[0]:
        return found
    if any(k.startswith(("visit_", "leave_")) for k in getattr(visitor, "__dict__", ())):
        return None
    if found[2] is not None and type(visitor.provider).set_metadata is not BaseMetadataProvider.set_metadata:
        return None
    _CHECKED[0] = visitor  # the scope visitor walks many subtrees itself: checked once
    return found


_CHECKED: list = [None]


_IS_VISITOR: dict[type, bool] = {}


def _visit(self: CSTNode, visitor):
    """CSTNode.visit while visitors() is active: a CSTVisitor's walk copies nothing (it returns self)."""
    kind = type(visitor)
    is_visitor = _IS_VISITOR.get(kind)
    if is_visitor is None:
        is_visitor = _IS_VISITOR[kind] = issubclass(kind, CSTVisitor)
    if not is_visitor:
        return _ORIGINAL_VISIT(self, visitor)
    plan = attribute_plan(visitor)
    tables = _dispatch(visitor)
    if tables is None:
        _walk(self, visitor, plan, _prunable(visitor, plan))
    else:
        _dispatch_walk(self, visitor, plan, _prunable(visitor, plan), *tables)
    return self


_PRUNE: dict[type, frozenset[type] | AllBut] = {}
TABLE_VISITORS = frozenset({ExpressionContextVisitor, ScopeVisitor})  # see visitors(tables=...)
_TABLES = [False]


def _prunable(visitor: object, plan) -> frozenset[type]:
    """FORMATTING where visiting those nodes would do nothing: a visitor with libcst's own on_visit and
    on_leave and no visit_X / leave_X (nor attribute callbacks) of its own for them. A table-building
    visitor (scope, expression context) skips them while visitors(tables=True) says so."""
    kind = type(visitor)
    if _TABLES[0] and kind in TABLE_VISITORS:
        return FORMATTING
    found = _PRUNE.get(kind)
    if found is None:
        own = {name for klass in kind.__mro__ if not klass.__module__.startswith(_STUBS) for name in vars(klass)}
        found = _PRUNE[kind] = FORMATTING if (
            plan is not True and kind.on_visit is CSTVisitor.on_visit and kind.on_leave is CSTVisitor.on_leave
            and not handles_formatting(own)) else NOTHING
    return found


@contextmanager
def visitors(tables: bool = False) -> Iterator[None]:
    """Within: read-only CSTVisitor traversals (`node.visit(visitor)`) do not rebuild the tree. With
    tables=True, the visitors in TABLE_VISITORS (libcst's scope and expression-context analyses) also skip
    FORMATTING nodes: their tables then have no entry for whitespace, punctuation and operator tokens,
    which have no scope or expression context of their own."""
    outer, outer_tables = CSTNode.visit, _TABLES[0]
    CSTNode.visit = _visit
    _TABLES[0] = tables
    try:
        yield
    finally:
        CSTNode.visit, _TABLES[0] = outer, outer_tables
        _CHECKED[0] = None


class _Replay(cst.CSTTransformer):
    """Hands libcst's _visit_and_replace_children the children's new values, computed beforehand."""

    def __init__(self, replaced: dict[int, object]) -> None:
        super().__init__()
        self.replaced = replaced

    def on_visit(self, node: CSTNode) -> bool:
        return False

    def on_leave(self, original_node: CSTNode, updated_node: CSTNode):
        return self.replaced.get(id(original_node), updated_node)

    def on_visit_attribute(self, node: CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: CSTNode, attribute: str) -> None:
        return None


def _transform(node: CSTNode, transformer: cst.CSTTransformer, plan, prune: frozenset[type]):
    updated = node
    if transformer.on_visit(node):
        replaced: dict[int, object] | None = None
        names = _ORDER.get(type(node)) or fields(node)
        hooks = None if plan is None else names if plan is True else plan.get(type(node).__name__)
        for name in names:
            value = getattr(node, name)
            hook = hooks is not None and name in hooks
            if hook:
                transformer.on_visit_attribute(node, name)
            kind = type(value)
            if kind is tuple or kind is list:
                for child in value:
                    if type(child) in prune:
                        continue
                    result = _transform(child, transformer, plan, prune)
                    if result is not child:
                        replaced = replaced or {}
                        replaced[id(child)] = result
            elif kind not in prune and (_IS_NODE.get(kind) or (kind not in _IS_NODE and _is_node(kind))):
                result = _transform(value, transformer, plan, prune)
                if result is not value:
                    replaced = replaced or {}
                    replaced[id(value)] = result
            if hook:
                transformer.on_leave_attribute(node, name)
        if replaced is not None:
            updated = node._visit_and_replace_children(_Replay(replaced))
    result = transformer.on_leave(node, updated)
    if not isinstance(result, (CSTNode, RemovalSentinel, FlattenSentinel)):
        raise CSTValidationError("Expected a node of type CSTNode or a RemovalSentinel, "
                                 f"but got a return value of {type(result).__name__}")
    return result


def transform(module: cst.Module, transformer: cst.CSTTransformer, attributes: bool | None = None,
              prune: frozenset[type] = NOTHING) -> cst.Module:
    """module.visit(transformer), copying only the nodes on the path to a replaced node: the same
    callbacks in the same order; `updated_node` is the original node where nothing below changed.
    attributes=False skips the per-attribute callbacks, True calls them for every field (None: as
    attribute_plan(transformer) says). Nodes of the classes in `prune` (and their subtrees) are not
    visited: the caller knows the transformer does nothing there."""
    plan = attribute_plan(transformer) if attributes is None else (True if attributes else None)
    result = _transform(module, transformer, plan, prune)
    if isinstance(result, (RemovalSentinel, FlattenSentinel)):
        raise TypeError("Cannot remove module")
    return result
