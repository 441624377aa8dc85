"""Cheaper stand-ins for three libcst metadata providers, computed in one code-generation pass.

libcst's PositionProvider (a position-tracking code generation), ParentNodeProvider (a visitor pass that
asks every node for its `children`) and QualifiedNameProvider (a visitor pass that stores a lazy value for
every node) cost about 4, 4 and 6 s on torch's 11k-line distributed test harness. `seed(wrapper)` puts
tables with the same keys, values and iteration order into a MetadataWrapper's cache, computed by one
code generation that tracks only what they need (~1 s), and leaves whitespace, punctuation and operator
tokens out until something asks about one (`_Tables`); qualified names are computed per node on first
use from the ScopeProvider, which stays libcst's. Patches keep asking for the libcst providers by name.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import (
    CodePosition, CodeRange, ExpressionContextProvider, ImportAssignment, MetadataWrapper, ParentNodeProvider,
    PositionProvider, QualifiedNameProvider, ScopeProvider,
)

from distdoctor.patching import fastcst, fastwalk


class _TrackingState(CodegenState):
    """Code generation that records, per node, its syntactic (start, end) lines and columns the way
    libcst's PositionProvidingCodegenState does, and each node's parent in ParentNodeProvider's order
    (when a node is left, its children, in order)."""

    __slots__ = ("line", "column", "ranges", "parents", "stack")

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line, self.column = 1, 0
        self.ranges: dict[cst.CSTNode, tuple[int, int, int, int]] = {}
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.stack: list[tuple[cst.CSTNode, int, int, list[cst.CSTNode]]] = [(module, 0, 0, [])]

    def _advance(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            segments = value.replace("\r\n", "\n").replace("\r", "\n").split("\n")
            self.line += len(segments) - 1
            self.column = len(segments[-1])
        else:
            self.column += len(value)

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self._advance(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self._advance(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        stack = self.stack
        stack[-1][3].append(node)
        stack.append((node, self.line, self.column, []))

    def after_codegen(self, node: cst.CSTNode) -> None:
        _, line, column, children = self.stack.pop()
        if node not in self.ranges:
            self.ranges[node] = (line, column, self.line, self.column)
        parents = self.parents
        for child in children:
            parents[child] = node

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> "_Syntactic":
        return _Syntactic(self, node, start_node, end_node)


class _Syntactic:
    """record_syntactic_position's context: the node's range is where the code generated inside it starts
    and ends (or start_node's start, end_node's end). A plain class: a generator-based context manager
    costs more than the rest of the tracking on large files."""

    __slots__ = ("state", "node", "start_node", "end_node", "line", "column")

    def __init__(self, state: _TrackingState, node: cst.CSTNode, start_node: cst.CSTNode | None,
                 end_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.line, self.column = self.state.line, self.state.column

    def __exit__(self, *exc: object) -> None:
        state = self.state
        line, column, end_line, end_column = self.line, self.column, state.line, state.column
        if self.start_node is not None:
            line, column = state.ranges[self.start_node][:2]
        if self.end_node is not None:
            end_line, end_column = state.ranges[self.end_node][2:]
        state.ranges[self.node] = (line, column, end_line, end_column)


class LazyTable(Mapping):
    """A read-only mapping over fixed keys whose values are made on access (subclasses: __getitem__)."""

    def __init__(self, keys) -> None:
        self._keys = keys

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


# the FORMATTING classes the first tracking pass leaves out: all but `)`, where an import's syntactic range
# ends (record_syntactic_position's end_node)
_UNTRACKED = fastwalk.FORMATTING - {cst.RightParen}


class _Tables:
    """The position and parent tables of one module. The first code generation tracks every node but the
    FORMATTING ones (whitespace, punctuation, operator tokens: ~60 % of the nodes, which no patch asks
    about): their tokens still move the line and column, they only get no entry. The first question about
    a formatting node, or a listing of a whole table, runs the complete tracking once (same values for
    the other nodes, same order)."""

    __slots__ = ("module", "ranges", "parents", "complete")

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.ranges, self.parents = _track(module, _UNTRACKED)
        self.complete = False

    def full(self) -> "_Tables":
        if not self.complete:
            self.ranges, self.parents = _track(self.module, ())
            self.complete = True
        return self

    def missing(self, node: object) -> bool:
        """Whether node may be in the complete tables although it is not in these."""
        return not self.complete and type(node) in _UNTRACKED


class _Table(Mapping):
    """One of a _Tables' mappings, complete as seen from outside; `indexed()` gives the partial one."""

    _field = ""

    def __init__(self, tables: _Tables) -> None:
        self._tables = tables

    def _get(self, node: object):
        tables = self._tables
        try:
            return getattr(tables, self._field)[node]
        except KeyError:
            if not tables.missing(node):
                raise
            return getattr(tables.full(), self._field)[node]

    def __contains__(self, node: object) -> bool:
        tables = self._tables
        if node in getattr(tables, self._field):
            return True
        return tables.missing(node) and node in getattr(tables.full(), self._field)

    def __iter__(self):
        return iter(getattr(self._tables.full(), self._field))

    def __len__(self) -> int:
        return len(getattr(self._tables.full(), self._field))

    def indexed(self) -> Mapping:
        """The table without FORMATTING nodes (unless already completed), in the complete table's order."""
        return getattr(self._tables, self._field)


class Positions(_Table):
    """PositionProvider's table: node -> CodeRange, built on access from plain tuples."""

    _field = "ranges"

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        line, column, end_line, end_column = self._get(node)
        return CodeRange(CodePosition(line, column), CodePosition(end_line, end_column))


class Parents(_Table):
    """ParentNodeProvider's table: node -> its parent."""

    _field = "parents"

    def __getitem__(self, node: cst.CSTNode) -> cst.CSTNode:
        return self._get(node)


def indexed(table: Mapping) -> Mapping:
    """table's nodes for a caller that looks only at non-FORMATTING node classes (cheaper, same order)."""
    return table.indexed() if isinstance(table, _Table) else table


def _track(module: cst.Module, skip) -> tuple[dict, dict]:
    """(ranges, parents) of every node of module but those of the classes in `skip` (whose subtrees must
    hold only such classes): one tracking code generation where those nodes' `_codegen` is their
    `_codegen_impl`, without the state's before/after calls."""
    state = _TrackingState(module)
    with fastcst.codegen(), fastcst.untracked(skip):
        module._codegen(state)
    return state.ranges, state.parents


_MISSING = object()


class QualifiedNames(LazyTable):
    """QualifiedNameProvider's table: every node -> its scope's qualified names for it, computed (and kept)
    on first access; the ScopeProvider is resolved on the first question."""

    def __init__(self, wrapper: MetadataWrapper, nodes: Mapping) -> None:
        super().__init__(nodes)
        self._wrapper = wrapper
        self._scopes: Mapping | None = None
        self._done: dict[cst.CSTNode, object] = {}

    def __getitem__(self, node: cst.CSTNode):
        names = self._done.get(node, _MISSING)  # one hash of the node (CSTNode.__hash__ is Python code)
        if names is not _MISSING:
            return names
        if node not in self._keys:
            raise KeyError(node)
        if self._scopes is None:
            self._scopes = self._wrapper.resolve(ScopeProvider)
        scope = self._scopes.get(node)
        names = scope.get_qualified_names_for(node) if scope else set()
        self._done[node] = names
        return names


def seed(wrapper: MetadataWrapper) -> None:
    """Fill wrapper's cache for PositionProvider, ParentNodeProvider and QualifiedNameProvider (one code
    generation); libcst then never runs those providers on this wrapper."""
    tables = _Tables(wrapper.module)
    positions = Positions(tables)
    wrapper._metadata[PositionProvider] = positions
    wrapper._metadata[ParentNodeProvider] = Parents(tables)
    wrapper._metadata[QualifiedNameProvider] = QualifiedNames(wrapper, positions)


@contextmanager
def import_names_memo() -> Iterator[None]:
    """Within: an ImportAssignment's qualified names for one full name are computed once (libcst recomputes
    them for every name looked up through the import: the module path, the aliases and one QualifiedName
    per match, ~a third of the qualified-name lookups on torch/testing). They depend only on the import
    node, which never changes, and the name; each caller gets its own copy of the set, as before."""
    original = ImportAssignment.__dict__.get("get_qualified_names_for")
    if original is None:  # another libcst: left as it is
        yield
        return
    memo: dict[tuple[int, str], tuple[ImportAssignment, set]] = {}

    def get_qualified_names_for(self: ImportAssignment, full_name: str) -> set:
        found = memo.get((id(self), full_name))
        if found is None or found[0] is not self:
            found = memo[(id(self), full_name)] = (self, original(self, full_name))  # self kept: its id stays its own
        return set(found[1])

    ImportAssignment.get_qualified_names_for = get_qualified_names_for  # type: ignore[method-assign]
    try:
        yield
    finally:
        ImportAssignment.get_qualified_names_for = original  # type: ignore[method-assign]


_SELF_TRAVERSING = (ExpressionContextProvider, ScopeProvider)  # in dependency order


class Wrapper(MetadataWrapper):
    """A MetadataWrapper that resolves the ExpressionContextProvider and ScopeProvider by calling their
    visit_Module directly. Each of them does its whole work there with its own visitor; libcst's batched
    resolution then walks the whole tree a second time calling nothing (a third of the scope cost).
    The tables are the ones libcst makes (same provider code, same visitors, same order)."""

    def resolve_many(self, providers: Collection) -> Mapping:
        wanted: set = set()
        _dependencies(providers, wanted)
        for provider_type in _SELF_TRAVERSING:
            if provider_type in wanted and provider_type not in self._metadata:
                provider = provider_type()
                with provider.resolve(self), fastwalk.visitors(tables=True):
                    provider.visit_Module(self.module)
                self._metadata[provider_type] = MappingProxyType(dict(provider._computed))
        return super().resolve_many(providers)


def _dependencies(providers: Collection, out: set) -> None:
    for provider in providers:
        if provider not in out:
            out.add(provider)
            _dependencies(provider.METADATA_DEPENDENCIES, out)
