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

import dataclasses
import inspect
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
    inits = _plain_inits()
    CSTNode.__post_init__ = _no_validation  # type: ignore[method-assign]
    try:
        for kind, init in inits:
            kind.__init__ = init  # type: ignore[misc]
        return cst.parse_module(text)
    finally:
        CSTNode.__post_init__ = outer  # type: ignore[method-assign]
        for kind, _ in inits:
            kind.__init__ = _GENERATED[kind]  # type: ignore[misc]


_GENERATED: dict[type, object] = {}  # node class -> its dataclass-generated __init__ (restored after a parse)
_PLAIN: dict[type, object] = {}  # node class -> its plain __init__, or None where it keeps its own
_NO_DEFAULT = object()


def _plain_inits() -> list[tuple[type, object]]:
    """(class, plain __init__) for every node class whose __init__ is the one `@dataclass(frozen=True)`
    generated: the same parameters and defaults, each field stored as that one stores it (its slot's
    descriptor, the descriptor `object.__setattr__` would find first, else `object.__setattr__`), without
    the `__post_init__` call (which only validates, skipped while parsing anyway). The node classes' own
    __init__ is ~a quarter of a large file's parse (most of the rest is native)."""
    out = []
    for kind in node_classes():
        if kind not in _PLAIN:
            _PLAIN[kind] = _make_plain_init(kind)
        if _PLAIN[kind] is not None:
            out.append((kind, _PLAIN[kind]))
    return out


def _make_plain_init(kind: type):
    init = vars(kind).get("__init__")
    params = getattr(kind, "__dataclass_params__", None)
    code = getattr(init, "__code__", None)
    if (code is None or code.co_filename != "<string>" or init.__qualname__ != f"{kind.__qualname__}.__init__"
            or params is None
            or not params.frozen or any("__post_init__" in vars(k) for k in kind.__mro__ if k is not CSTNode)):
        return None
    namespace: dict[str, object] = {"_osa": object.__setattr__, "_NO_DEFAULT": _NO_DEFAULT}
    args, body = [], []
    for f in dataclasses.fields(kind):
        if not f.init or getattr(f, "kw_only", False):
            return None  # not a shape this builder copies
        name = f.name
        try:
            found = inspect.getattr_static(kind, name)
        except AttributeError:
            found = None
        if type(found) is _MEMBER:
            namespace[f"_set_{name}"] = found.__set__
            store = f"_set_{name}(self, {{}})"
        else:
            store = f"_osa(self, {name!r}, {{}})"
        if f.default is not dataclasses.MISSING:
            namespace[f"_d_{name}"] = f.default
            args.append(f"{name}=_d_{name}")
            body.append(store.format(name))
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_f_{name}"] = f.default_factory
            args.append(f"{name}=_NO_DEFAULT")
            body.append(store.format(f"_f_{name}() if {name} is _NO_DEFAULT else {name}"))
        else:
            args.append(name)
            body.append(store.format(name))
    source = f"def __init__(self, {', '.join(args)}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
    exec(source, namespace)  # noqa: S102 - our own generated code, built from the dataclass's fields
    _GENERATED[kind] = init
    return namespace["__init__"]


_MEMBER = type(CSTNode.__dict__.get("__weakref__") or cst.Name.__dict__["value"])


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
