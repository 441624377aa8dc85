"""Small libcst helpers shared by patch modules: name resolution, argument lookup, literals, tree walks."""

from __future__ import annotations

import ast
import heapq
from typing import Iterator, Mapping

import libcst as cst
from libcst._metadata_dependent import LazyValue
import libcst.matchers as m
from libcst.metadata import ParentNodeProvider, QualifiedNameProvider

from distdoctor.patching import fastmeta, fastwalk

STRINGS = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)


def metadata_table(visitor: cst.MetadataDependent, provider) -> Mapping:
    """The provider's table for the module being transformed, resolved on first use (the codemod's
    MetadataWrapper caches it, so the patches of one run share it) when the visitor did not declare it."""
    tables = visitor.metadata
    if provider in tables:
        return tables[provider]
    wrapper = getattr(getattr(visitor, "context", None), "wrapper", None)
    return wrapper.resolve(provider) if wrapper is not None else {}


def lookup(visitor: cst.MetadataDependent, provider, node: cst.CSTNode, default=None):
    value = metadata_table(visitor, provider).get(node, default)
    return value() if isinstance(value, LazyValue) else value


def qualified_names(visitor: cst.MetadataDependent, node: cst.CSTNode) -> set[str]:
    """Fully qualified names of node (`dist.init_process_group` -> torch.distributed.init_process_group)."""
    return {q.name for q in lookup(visitor, QualifiedNameProvider, node, set()) or ()}


def is_call_to(visitor: cst.MetadataDependent, node: cst.CSTNode, names: frozenset[str] | set[str]) -> bool:
    return isinstance(node, cst.Call) and bool(qualified_names(visitor, node.func) & names)


def get_arg(call: cst.Call, name: str, pos: int | None = None) -> cst.Arg | None:
    """The argument bound to parameter `name`, by keyword or (when pos is given) by position."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    if pos is not None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if len(positional) > pos and all(not a.star for a in call.args[: call.args.index(positional[pos])]):
            return positional[pos]
    return None


def literal_text(node: cst.CSTNode) -> str | None:
    """The text of a string literal; f-strings give their literal parts with `{}` for each field."""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:
            return None
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = literal_text(node.left), literal_text(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        return "".join(p.value if isinstance(p, cst.FormattedStringText) else "{}" for p in node.parts)
    return None


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under node (itself included), depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(fastwalk.children(current)))  # node.children would copy current


def strings_in(node: cst.CSTNode) -> Iterator[str]:
    """Lower-cased text of every string literal under node (f-string fields as `{}`)."""
    for sub in walk(node):
        if isinstance(sub, (cst.SimpleString, cst.FormattedString)):
            text = literal_text(sub)
            if text is not None:
                yield text.lower()


def mentions_cuda(node: cst.CSTNode) -> bool:
    """node uses torch.cuda, `.cuda(...)`, or a string literal naming cuda."""
    for sub in walk(node):
        if isinstance(sub, cst.Attribute) and sub.attr.value == "cuda":
            return True
        if isinstance(sub, cst.Name) and sub.value == "cuda":
            return True
        if isinstance(sub, (cst.SimpleString, cst.FormattedString)):
            text = literal_text(sub)
            if text is not None and "cuda" in text.lower():
                return True
    return False


def ancestors(visitor: cst.MetadataDependent, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Parents of node from the nearest up to the Module."""
    current = node
    while True:
        try:
            current = visitor.get_metadata(ParentNodeProvider, current)
        except KeyError:
            return
        yield current
        if isinstance(current, cst.Module):
            return


def enclosing_statement(visitor: cst.MetadataDependent, node: cst.CSTNode) -> cst.BaseStatement | None:
    for parent in ancestors(visitor, node):
        if isinstance(parent, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return parent
    return None


def parenthesize(expr: cst.BaseExpression) -> cst.BaseExpression:
    """expr with parentheses when it would bind looser than an operand of `if`/`not`/`and`."""
    if isinstance(expr, (cst.IfExp, cst.Lambda, cst.BooleanOperation, cst.NamedExpr)) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


def assigned_names(stmt: cst.CSTNode) -> set[str]:
    """Plain names bound by a simple statement line (`x = ...`, `x: T = ...`)."""
    names: set[str] = set()
    if not isinstance(stmt, cst.SimpleStatementLine):
        return names
    for small in stmt.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if isinstance(target.target, cst.Name):
                    names.add(target.target.value)
        elif isinstance(small, cst.AnnAssign) and small.value is not None and isinstance(small.target, cst.Name):
            names.add(small.target.value)
    return names


def is_none(node: cst.CSTNode) -> bool:
    return m.matches(node, m.Name("None"))




def _from_import_aliases(nodes) -> dict[str, str]:
    """Local name -> imported name for every `from x import name [as local]` among nodes."""
    aliases: dict[str, str] = {}
    for node in nodes:
        if type(node) is cst.ImportFrom and not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                imported = cst.helpers.get_full_name_for_node(alias.name) or ""
                aliases[alias.evaluated_alias or imported] = imported.rsplit(".", 1)[-1]
    return aliases


_NAMED: list = [None, [], {}]  # the ParentNodeProvider table last indexed, its names/attributes, aliases


def _named_index(visitor: cst.MetadataDependent) -> tuple[list[cst.CSTNode], dict[str, str]]:
    """The Name and Attribute nodes of the ParentNodeProvider table (in its order) and the file's
    `from ... import x as y` aliases, computed once per table (the patches of one file share it)."""
    table = fastmeta.indexed(metadata_table(visitor, ParentNodeProvider))
    if _NAMED[0] is not table:
        named = (cst.Name, cst.Attribute)
        nodes = [n for n in table if type(n) in named or type(n) is cst.ImportFrom]
        _NAMED[:] = [table, [n for n in nodes if type(n) is not cst.ImportFrom], _from_import_aliases(nodes)]
    return _NAMED[1], _NAMED[2]


def named_nodes(visitor: cst.MetadataDependent, accept, wanted) -> list[tuple[cst.CSTNode, set[str]]]:
    """Names and attributes whose identifier passes wanted(ident) (directly or through a
    `from ... import x as y` alias) and whose qualified names pass accept(names).

    Candidates come from the ParentNodeProvider table (every node, no extra traversal); name
    resolution (scopes, qualified names) is computed only when a candidate exists."""
    nodes, aliases = _named_index(visitor)
    candidates = []
    for node in nodes:
        if type(node) is cst.Name:
            ident = node.value
            if wanted(ident) or (ident in aliases and wanted(aliases[ident])):
                candidates.append((node, ident))
        elif wanted(node.attr.value):
            candidates.append((node, node.attr.value))
    out = []
    for node, ident in candidates:
        names = qualified_names(visitor, node)
        if accept(names or {ident}):  # an unresolved name is judged by its identifier
            out.append((node, names))
    return out


def calls_to(visitor: cst.MetadataDependent, names: frozenset[str] | set[str]) -> list[cst.Call]:
    """Every call whose callee resolves to one of names (`import torch.distributed as dist` included)."""
    last = {n.rsplit(".", 1)[-1] for n in names}
    calls = []
    for node, _ in named_nodes(visitor, lambda found: bool(found & names), last.__contains__):
        parent = visitor.get_metadata(ParentNodeProvider, node, None)
        if isinstance(parent, cst.Call) and parent.func is node:
            calls.append(parent)
    return calls


# ---- cheap screens on Python's own (C) parser: decide whether a file is worth a libcst pass ----

def ast_ident(node: ast.AST) -> str | None:
    """`f` for `f`, `attr` for `x.y.attr`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def ast_aliases(tree: ast.Module, names: set[str]) -> set[str]:
    """names plus the local names they are imported under (`from m import name as local`)."""
    out = set(names)
    for node in ast_nodes(tree, ast.ImportFrom):
        for alias in node.names:
            if alias.name in names and alias.asname:
                out.add(alias.asname)
    return out


def ast_calls(tree: ast.Module, names: set[str]) -> list[ast.Call]:
    """Calls whose callee's last identifier is one of names or an alias of one."""
    idents = ast_aliases(tree, names)
    return [n for n in ast_nodes(tree, ast.Call) if ast_ident(n.func) in idents]


def ast_walk(tree: ast.AST) -> list[ast.AST]:
    """list(ast.walk(tree)): the same nodes in the same (breadth-first) order, ~3x faster."""
    order = [tree]
    append = order.append
    AST = ast.AST
    for node in order:  # grows while iterated
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, AST):
                append(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, AST):
                        append(item)
    return order


_AST_INDEX: list = [None, [], {}]  # the tree last asked, its nodes in ast.walk order, their indexes by class


def ast_nodes(tree: ast.AST, *types: type) -> list[ast.AST]:
    """Every node of tree whose class is one of types, in ast.walk order (do not change the list).

    The engine screens one tree at a time with every patch's screen: the tree is walked once and indexed
    by node class, and each screen reads only the classes it asks for instead of walking it again."""
    if _AST_INDEX[0] is not tree:
        order = ast_walk(tree)
        by_class: dict = {}
        for i, node in enumerate(order):
            by_class.setdefault(type(node), []).append(i)
        _AST_INDEX[:] = [tree, order, {(t,): [order[i] for i in found] for t, found in by_class.items()},
                         by_class]
    found = _AST_INDEX[2].get(types)
    if found is None:
        order, by_class = _AST_INDEX[1], _AST_INDEX[3]
        found = _AST_INDEX[2][types] = [order[i] for i in heapq.merge(*(by_class.get(t, ()) for t in types))]
    return found


def ast_guarded(tree: ast.AST, guard) -> set[int]:
    """ids of the nodes inside an `if` statement or conditional expression (test, body or else) whose test
    passes guard(test), as GuardAwareCommand counts them."""
    out: set[int] = set()
    for node in ast_nodes(tree, ast.If, ast.IfExp):  # ast.walk order: an enclosing test comes first
        if id(node) not in out and guard(node.test):
            out.update(id(n) for n in ast_walk(node))
    return out


def ast_any_unguarded(tree: ast.AST, nodes: list[ast.AST], guard) -> bool:
    """Whether one of `nodes` lies outside every `if` / conditional expression whose test passes guard(test)
    (the guarded regions are computed only when there is a node to ask about)."""
    if not nodes:
        return False
    guarded = ast_guarded(tree, guard)
    return any(id(node) not in guarded for node in nodes)


def ast_plain_string(node: ast.AST) -> str | None:
    """The value of a str constant written as one plain quoted literal ("cuda", not "cu" "da", r"cuda" or
    "cu\\x64a"), which libcst parses as one SimpleString; None otherwise. Python's parser merges
    implicitly concatenated literals: only the span (one line, value plus two quotes) tells them apart."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    if node.lineno != node.end_lineno or node.end_col_offset - node.col_offset != len(node.value.encode()) + 2:
        return None
    return node.value


def ast_root_name(node: ast.AST) -> str | None:
    """The name a dotted expression starts from, through attributes, calls and subscripts as libcst's
    get_full_name_for_node follows them (`self.streams[-1].synchronize` -> self); None for anything else."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


_LAST_INDEX: tuple[object, dict] = (None, {})


def nodes_of(visitor: cst.MetadataDependent, *types: type) -> list[cst.CSTNode]:
    """Every node of the module being transformed that is an instance of one of types, in source order.

    One pass over the keys of the PositionProvider table (every node, resolved once per wrapper and shared
    by the patches) is cached on the wrapper by type; `m.findall(module, ...)` walks the whole tree each call."""
    from libcst.metadata import PositionProvider

    global _LAST_INDEX
    wrapper = getattr(getattr(visitor, "context", None), "wrapper", None)
    if wrapper is not None and _LAST_INDEX[0] is wrapper:
        index = _LAST_INDEX[1]
    else:
        index = {}
        for node in fastmeta.indexed(metadata_table(visitor, PositionProvider)):
            index.setdefault(type(node), []).append(node)
        _LAST_INDEX = (wrapper, index)  # one file at a time: the index of the wrapper last asked
    if len(types) == 1:
        return list(index.get(types[0], ()))
    order = index.get(_ORDER)  # every node's place in the table, made on the first multi-type question
    if order is None or wrapper is None:
        order = {id(n): i for i, n in enumerate(fastmeta.indexed(metadata_table(visitor, PositionProvider)))}
        if wrapper is not None:
            index[_ORDER] = order
    found = [n for t in types for n in index.get(t, ())]
    return sorted(found, key=lambda n: order[id(n)])


_ORDER = object()  # the key of the node order in a nodes_of index (no node class)


def release() -> None:
    """Drop the indexes of the last file (its `ast` tree, its libcst tables): the engine calls this when
    a file is done, so that they are freed then and not kept until the next file."""
    global _LAST_INDEX
    _NAMED[:] = [None, [], {}]
    _AST_INDEX[:] = [None, [], {}]
    _LAST_INDEX = (None, {})
