"""fastwalk's traversals call the same callbacks, in the same order, as libcst's own `node.visit`, and a
transformer's result is the same code; only the copies of unchanged nodes are gone."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
import torch
from libcst.metadata import MetadataWrapper, ScopeProvider

from distdoctor.patching import fastwalk

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "patches").glob("*/*.in.py"))
TORCH = Path(torch.__file__).parent
TORCH_SAMPLE = [TORCH / p for p in ("distributed/distributed_c10d.py", "nn/parallel/distributed.py",
                                    "testing/_internal/common_distributed.py", "_tensor.py")]
SYNTAX = '''
from . import a as b, c
from .. import *
@deco(x)
class K(Base, metaclass=M):
    def f(self, /, a: int = 1, *args, b, **kw) -> "K":
        global g
        y = [i for i in range(3) if i]
        z = {k: v async for k, v in w}
        del y[0], z
        return f"{a!r:>{b}} {a=}" + rb"x" b"y"
lam = lambda q, *, r=2: (q, r)
match lam:
    case [1, *rest] | {"k": _, **kw} if rest:
        pass
    case K(a=1) as k:
        raise ValueError() from None
try:
    pass
except* (A, B) as e:
    x: list[int] = 1 if e else 2
with open("f") as h, (yield):
    await h
'''


def _sources() -> list[tuple[str, str]]:
    out = [("syntax", SYNTAX)] + [(p.name, p.read_text()) for p in FIXTURES]
    return out + [(str(p), p.read_text()) for p in TORCH_SAMPLE if p.is_file()]


class _Log(cst.CSTVisitor):
    """Logs every callback, attribute ones included (its own on_*_attribute: every field)."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, int, str]] = []

    def on_visit(self, node):
        self.log.append(("visit", id(node), ""))
        return not isinstance(node, cst.Lambda)  # skips some children, as visitors do

    def on_leave(self, original_node):
        self.log.append(("leave", id(original_node), ""))

    def on_visit_attribute(self, node, attribute):
        self.log.append(("visit_attr", id(node), attribute))

    def on_leave_attribute(self, original_node, attribute):
        self.log.append(("leave_attr", id(original_node), attribute))


class _Bases(cst.CSTVisitor):
    """One per-attribute callback of its own, as libcst's ScopeVisitor has."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, int]] = []

    def visit_ClassDef_bases(self, node):
        self.log.append(("bases", id(node)))

    def leave_ClassDef_bases(self, node):
        self.log.append(("/bases", id(node)))

    def visit_Name(self, node):
        self.log.append(("name", id(node)))


@pytest.mark.parametrize("name,source", _sources(), ids=lambda v: v if len(v) < 60 else None)
def test_visitor_callbacks_match_libcst(name, source):
    module = cst.parse_module(source)
    for make in (_Log, _Bases):
        plain, fast = make(), make()
        assert module.visit(plain) is module
        with fastwalk.visitors():
            assert module.visit(fast) is module
        assert fast.log == plain.log and plain.log
    assert cst.CSTNode.visit is fastwalk._ORIGINAL_VISIT  # restored
    for node in _all_nodes(module):
        assert fastwalk.children(node) == list(node.children)


def test_formatting_nodes_hold_only_formatting_nodes():
    """Skipping a FORMATTING node skips nothing else: everything below one is FORMATTING too."""
    for _, source in _sources():
        module = cst.parse_module(source)
        parents = MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.ParentNodeProvider)
        for node, parent in parents.items():
            if type(parent) in fastwalk.FORMATTING:
                assert type(node) in fastwalk.FORMATTING, (type(parent), type(node))


def test_leaf_nodes_hold_only_formatting_nodes():
    """Skipping a LEAVES node (once FORMATTING is skipped) skips no callback below it."""
    seen = set()
    for _, source in _sources():
        module = cst.parse_module(source)
        parents = MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.ParentNodeProvider)
        for node, parent in parents.items():
            if type(parent) in fastwalk.LEAVES:
                seen.add(type(parent))
                assert type(node) in fastwalk.FORMATTING, (type(parent), type(node))
    assert cst.Name in seen  # (a name with whitespace or parentheses around it)


def test_unhandled_leaves():
    assert fastwalk.unhandled_leaves({"leave_Call"}) == fastwalk.LEAVES
    assert cst.Name not in fastwalk.unhandled_leaves({"leave_Name", "visit_Call"})
    assert cst.SimpleString not in fastwalk.unhandled_leaves({"visit_SimpleString_value"})


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    return [module, *MetadataWrapper(module, unsafe_skip_copy=True).resolve(cst.metadata.ParentNodeProvider)]


class _Rewrite(cst.CSTTransformer):
    """Renames some names, drops `pass` statements and `del`s, doubles `global`s; logs every callback."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, int, str]] = []

    def on_visit(self, node):
        self.log.append(("visit", id(node), ""))
        return super().on_visit(node)

    def on_leave(self, original_node, updated_node):
        self.log.append(("leave", id(original_node), type(updated_node).__name__))
        return super().on_leave(original_node, updated_node)

    def leave_Name(self, original_node, updated_node):
        return updated_node.with_changes(value=updated_node.value + "_") if len(updated_node.value) == 1 \
            else updated_node

    def leave_Pass(self, original_node, updated_node):
        return cst.RemoveFromParent()

    def leave_Del(self, original_node, updated_node):
        return cst.RemoveFromParent()

    def leave_Global(self, original_node, updated_node):
        return cst.FlattenSentinel([updated_node, updated_node])


@pytest.mark.parametrize("name,source", _sources()[:8], ids=lambda v: v if len(v) < 60 else None)
def test_transform_matches_libcst(name, source):
    module = cst.parse_module(source)
    plain, fast = _Rewrite(), _Rewrite()
    expected = module.visit(plain)
    got = fastwalk.transform(module, fast)
    assert got.code == expected.code
    assert fast.log == plain.log


def test_transform_keeps_unchanged_nodes():
    module = cst.parse_module("def f():\n    return 1\n\nx = ab\ny = c\n")
    got = fastwalk.transform(module, _Rewrite())
    assert got.code == "def f_():\n    return 1\n\nx_ = ab\ny_ = c_\n"
    assert got.body[0].body is module.body[0].body  # nothing changed below: the original node itself
    unchanged = fastwalk.transform(module, cst.CSTTransformer())
    assert unchanged is module


def test_scope_analysis_is_libcsts():
    source = TORCH_SAMPLE[0].read_text() if TORCH_SAMPLE[0].is_file() else SYNTAX
    plain = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True).resolve(ScopeProvider)
    module = cst.parse_module(source)
    with fastwalk.visitors(tables=True):
        fast = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    # the same scope for every node but whitespace, punctuation and operator tokens (no entry: no scope)
    assert [type(n) for n in fast] == [type(n) for n in plain if type(n) not in fastwalk.FORMATTING]
    assert all(type(fast.get(n)) is type(s) for n, s in zip(fast, (s for p, s in plain.items()
                                                                      if type(p) not in fastwalk.FORMATTING)))

    def summary(table):
        out = []
        for node, scope in table.items():
            if isinstance(node, cst.Name) and scope is not None:
                out.append((node.value, type(scope).__name__, sorted(q.name for q in scope.get_qualified_names_for(node))))
        return out

    assert summary(fast) == summary(plain)


def test_only_known_conditional_fields():
    """fastwalk records one field order per node class; libcst visits a field conditionally only in the
    classes it knows (format_spec of f-string and t-string expressions)."""
    import ast
    import inspect

    import libcst._nodes.expression as expression
    import libcst._nodes.statement as statement

    conditional = set()
    for mod in (expression, statement):
        for node in ast.walk(ast.parse(inspect.getsource(mod))):
            if isinstance(node, ast.ClassDef):
                for fn in node.body:
                    if isinstance(fn, ast.FunctionDef) and fn.name == "_visit_and_replace_children":
                        for sub in ast.walk(fn):
                            if isinstance(sub, ast.IfExp):
                                test = ast.unparse(sub.test)
                                if not test.startswith("isinstance("):  # ImportFrom names: by value type
                                    conditional.add((node.name, test))
    assert {name for name, _ in conditional} == {t.__name__ for t in fastwalk._CONDITIONAL}


def test_scope_walk_counts_assignments_as_libcst():
    """The dispatching walk does ScopeVisitor.on_leave's work itself: every scope ends with libcst's
    assignment count, every assignment and access with libcst's index, and each access sees the same
    assignments."""
    for source in (SYNTAX, TORCH_SAMPLE[1].read_text() if TORCH_SAMPLE[1].is_file() else SYNTAX):
        plain_module, fast_module = cst.parse_module(source), cst.parse_module(source)
        plain = MetadataWrapper(plain_module, unsafe_skip_copy=True).resolve(ScopeProvider)
        with fastwalk.visitors(tables=True):
            fast = MetadataWrapper(fast_module, unsafe_skip_copy=True).resolve(ScopeProvider)

        def facts(table):
            scopes = list(dict.fromkeys(s for s in table.values() if s is not None))
            out = []
            for scope in scopes:
                assigned = sorted((a.name, a._Assignment__index) for a in scope.assignments
                                  if hasattr(a, "_Assignment__index"))
                accessed = sorted((a.node.value if isinstance(a.node, cst.Name) else type(a.node).__name__,
                                   a._Access__index, len(a.referents)) for a in scope.accesses)
                out.append((type(scope).__name__, scope._assignment_count, assigned, accessed))
            return out

        assert facts(fast) == facts(plain) and facts(plain)


class _Static(cst.CSTVisitor):
    """visit_/leave_ methods that are not plain functions: the dispatching walk calls them as libcst does."""

    seen: list[str] = []

    @staticmethod
    def visit_Name(node):
        _Static.seen.append(node.value)

    @classmethod
    def leave_Name(cls, node):
        cls.seen.append("/" + node.value)


def test_dispatch_calls_static_and_class_methods_as_libcst():
    module = cst.parse_module("a = b(c)\n")
    _Static.seen = []
    module.visit(_Static())
    plain, _Static.seen = _Static.seen, []
    with fastwalk.visitors():
        module.visit(_Static())
    assert _Static.seen == plain == ["a", "/a", "b", "/b", "c", "/c"]
