"""Cheaper libcst parse and code generation: the same trees and the same text, less Python per node.

- `parse_module(text)`: libcst's parse with node validation switched off while the native parser builds
  the tree. Every node's `__post_init__` only calls `_validate()`, which checks invariants that a tree
  the parser built from source already holds (libcst's own comment there suggests moving it out of the
  parse); it is a seventh of a large file's parse. Trees the patches build are still validated.
- `codegen()`: while active, expression code generation opens its parentheses with a plain context
  object instead of a generator-based context manager (`_parenthesize` runs for every expression; its
  `@contextmanager` costs more than the tokens it writes), same calls in the same order.
- `code(module)`: `module.code` under `codegen()`, with a state whose no-op `record_syntactic_position`
  is a shared plain object too.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import libcst as cst
from libcst._nodes.base import CSTNode
from libcst._nodes.expression import _BaseParenthesizedNode
from libcst._nodes.internal import CodegenState

def _no_validation(self: CSTNode) -> None:
    return None


def parse_module(text: str) -> cst.Module:
    """cst.parse_module(text), without validating the nodes the parser builds."""
    outer = CSTNode.__post_init__
    CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = outer  # type: ignore[method-assign]


class _Parens:
    """`_BaseParenthesizedNode._parenthesize` as a plain context object: lpar, the state's syntactic
    position record around the body, rpar."""

    __slots__ = ("node", "state", "inner")

    def __init__(self, node: _BaseParenthesizedNode, state: CodegenState) -> None:
        self.node, self.state = node, state

    def __enter__(self) -> None:
        for lpar in self.node.lpar:
            lpar._codegen(self.state)
        self.inner = self.state.record_syntactic_position(self.node)
        self.inner.__enter__()

    def __exit__(self, *exc: object) -> bool:
        if self.inner.__exit__(*exc):
            return True  # never: no record_syntactic_position swallows an exception
        if exc[0] is None:
            for rpar in self.node.rpar:
                rpar._codegen(self.state)
        return False


def _parenthesize(self: _BaseParenthesizedNode, state: CodegenState) -> _Parens:
    return _Parens(self, state)


@contextmanager
def codegen() -> Iterator[None]:
    """Within: expressions parenthesize through `_Parens` (the same output, the same callbacks)."""
    outer = _BaseParenthesizedNode._parenthesize
    _BaseParenthesizedNode._parenthesize = _parenthesize  # type: ignore[method-assign]
    try:
        yield
    finally:
        _BaseParenthesizedNode._parenthesize = outer  # type: ignore[method-assign]


class _Nothing:
    """A reusable no-op context object."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


_NOTHING = _Nothing()


class _PlainState(CodegenState):
    """libcst's CodegenState, with its no-op `record_syntactic_position` as a shared plain object."""

    def record_syntactic_position(self, node: CSTNode, *, start_node: CSTNode | None = None,
                                  end_node: CSTNode | None = None) -> _Nothing:
        return _NOTHING


def node_classes() -> list[type]:
    """Every CSTNode class (abstract ones included) whose `_codegen` is CSTNode's own."""
    out: dict[type, None] = {}
    todo = [CSTNode]
    while todo:
        kind = todo.pop()
        todo.extend(kind.__subclasses__())
        if kind is not CSTNode and kind._codegen is CSTNode._codegen:
            out[kind] = None  # once, however many bases lead to it
    return list(out)


@contextmanager
def untracked(classes) -> Iterator[None]:
    """Within: nodes of these classes generate their code without the state's before_codegen /
    after_codegen calls (`_codegen` is their `_codegen_impl`): for a state whose calls do nothing there
    (libcst's own are no-ops; the position tracking leaves such nodes out)."""
    patched = [kind for kind in dict.fromkeys(classes) if kind._codegen is CSTNode._codegen]
    try:
        for kind in patched:
            kind._codegen = kind._codegen_impl  # type: ignore[method-assign]
        yield
    finally:
        for kind in patched:
            del kind._codegen


def code(module: cst.Module) -> str:
    """`module.code`, generated with the cheaper context objects and without the no-op per-node calls."""
    state = _PlainState(default_indent=module.default_indent, default_newline=module.default_newline)
    with codegen(), untracked(node_classes()):
        module._codegen(state)
    return "".join(state.tokens)
