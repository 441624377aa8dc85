"""The libcst pass of distdoctor.hang.source: one walk of a module gives the span of every branch, loop and
function with its header and whether it reads the rank. Imported only when a file is not in the cache."""

from __future__ import annotations

import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

# identifiers that say "which rank am I": rank, local_rank, is_main_process(), trainer.is_global_zero, ...
RANK_NAME = re.compile(r"(^|_)(rank|rank0|rank_zero|global_rank|local_rank|ddp_rank|node_rank|process_index)$"
                       r"|^(is_)?(main|master)(_process)?$|^is_(local_)?(main|master)|^get_rank$|is_global_zero"
                       r"|is_rank_zero|is_world_process_zero|^RANK$|^LOCAL_RANK$", re.IGNORECASE)
RANK_DECORATOR = re.compile(r"rank_?zero|main_process|master_only|rank0|on_rank_0|local_main", re.IGNORECASE)


DEBUG_CALLS = {"breakpoint", "set_trace", "post_mortem"}
CONSOLE_CALLS = {("code", "interact"), ("IPython", "embed")}  # an interactive console opened to inspect a step
LOCK_CALLS = ("acquire", "release")


def _exits(body: cst.BaseSuite) -> str:
    """The statement that ends a block when it leaves the function or loop (return, continue, break, raise)."""
    stmts = body.body if isinstance(body, cst.IndentedBlock) else [body]
    last = stmts[-1] if stmts else None
    if isinstance(last, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and last.body:
        kind = type(last.body[-1]).__name__.lower()
        return kind if kind in ("return", "continue", "break", "raise") else ""
    return ""


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: list[str] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node.value)


def _names(node: cst.CSTNode) -> list[str]:
    visitor = _Names()
    node.visit(visitor)
    return visitor.names


def reads_rank(node: cst.CSTNode) -> bool:
    """Whether an expression reads an identifier that names the rank (a name, attribute or called function)."""
    visitor = _Names()
    node.visit(visitor)
    return any(RANK_NAME.search(n) for n in visitor.names)


class _Spans(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.spans: list[dict] = []

    def _lines(self, node: cst.CSTNode) -> tuple[int, int]:
        pos = self.get_metadata(PositionProvider, node)
        return pos.start.line, pos.end.line

    def _add(self, node: cst.CSTNode, kind: str, header_node: cst.CSTNode, header: str, on_rank: bool,
             body: cst.CSTNode | None = None) -> None:
        start, end = self._lines(node)
        span = {"kind": kind, "start": start, "end": end, "line": self._lines(header_node)[0], "header": header,
                "on_rank": on_rank}
        if body is not None:
            span["body"] = list(self._lines(body))
        self.spans.append(span)

    def visit_If(self, node: cst.If) -> None:
        self._add(node, "if", node.test, f"if {self.module.code_for_node(node.test)}:", reads_rank(node.test),
                  node.body)
        self.spans[-1]["exits"] = _exits(node.body)

    def visit_Call(self, node: cst.Call) -> None:
        """breakpoint(), pdb.set_trace(), ipdb.set_trace(), ...: a debugger stop (kind "debug", no body)."""
        func = node.func
        name = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) \
            else ""
        base = func.value.value if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) else ""
        if name in LOCK_CALLS and isinstance(func, cst.Attribute):
            line = self._lines(node)[0]
            self.spans.append({"kind": name, "start": line, "end": line, "line": line,
                               "header": self.module.code_for_node(node), "on_rank": False,
                               "lock": self.module.code_for_node(func.value)})
        if name in DEBUG_CALLS or (base, name) in CONSOLE_CALLS:
            line = self._lines(node)[0]
            self.spans.append({"kind": "debug", "start": line, "end": line, "line": line,
                               "header": self.module.code_for_node(node), "on_rank": False})

    def visit_For(self, node: cst.For) -> None:
        code = self.module.code_for_node
        self._add(node, "for", node.target, f"for {code(node.target)} in {code(node.iter)}:", reads_rank(node.iter))

    def visit_While(self, node: cst.While) -> None:
        self._add(node, "while", node.test, f"while {self.module.code_for_node(node.test)}:", reads_rank(node.test))
        test = node.test
        self.spans[-1]["forever"] = (isinstance(test, cst.Name) and test.value == "True") or \
            (isinstance(test, cst.Integer) and test.evaluated_value != 0)
        self.spans[-1]["reads"] = sorted(set(_names(test)))

    def visit_Try(self, node: cst.Try) -> None:
        """Each except clause (kind "except"): its header, the lines of the try body it guards (`tried`), the
        statement that ends it when it leaves the loop or function (`continue` skips the rest of the loop's body)
        and the names it catches."""
        code = self.module.code_for_node
        for handler in node.handlers:
            kind = code(handler.type) if handler.type is not None else ""
            name = f" as {code(handler.name.name)}" if handler.name is not None else ""
            self._add(handler, "except", handler, f"except {kind}{name}:" if kind else "except:", False,
                      handler.body)
            self.spans[-1]["exits"] = _exits(handler.body)
            self.spans[-1]["catches"] = _names(handler.type) if handler.type is not None else []
            self.spans[-1]["tried"] = list(self._lines(node.body))
        if node.finalbody is not None:
            self._add(node.finalbody, "finally", node.finalbody, "finally:", False, node.finalbody.body)
            self.spans[-1]["tried"] = list(self._lines(node.body))

    def _assign(self, node: cst.CSTNode, targets: list[cst.CSTNode]) -> None:
        """An assignment statement (kind "assign") and the plain names it binds (`names`)."""
        names = [n for t in targets for n in _names(t)] if all(
            isinstance(t, (cst.Name, cst.Tuple, cst.List)) for t in targets) else []
        if names:
            self._add(node, "assign", node, self.module.code_for_node(node).strip(), False)
            self.spans[-1]["names"] = names

    def visit_Assign(self, node: cst.Assign) -> None:
        self._assign(node, [t.target for t in node.targets])

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._assign(node, [node.target])

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._assign(node, [node.target])

    def visit_With(self, node: cst.With) -> None:
        """A `with` statement (kind "with"): its header and body lines; a rank waiting in its context manager's
        __enter__ is called from the header line."""
        items = ", ".join(self.module.code_for_node(i) for i in node.items)
        self._add(node, "with", node, f"with {items}:", any(reads_rank(i) for i in node.items), node.body)
        self.spans[-1]["line"] = self._lines(node)[0]
        self.spans[-1]["items"] = [self.module.code_for_node(i.item) for i in node.items]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        decorators = [self.module.code_for_node(d.decorator) for d in node.decorators]
        self._add(node, "def", node.decorators[0] if node.decorators else node.name,
                  "".join(f"@{d} " for d in decorators) + f"def {node.name.value}(...)",
                  any(RANK_DECORATOR.search(d) for d in decorators))


def spans(source: bytes) -> list[dict]:
    """Every if / for / while / def / except / finally / with of a module: kind, start/end lines, header line and
    text, on_rank, and for an if or except the lines of its body and the statement that ends it when it exits
    (`exits`; an except also the names it `catches`, an except or finally the try body's lines, `tried`); for a
    while whether its test is constant (`forever`) and the names it `reads`; for a with its items' code
    (`items`); every assignment to plain names (kind "assign", the `names` it binds); every `X.acquire()` and
    `X.release()` call (kinds "acquire", "release", `lock`: the code of X); and every debugger call or
    interactive console (kind "debug"). Raises libcst.ParserSyntaxError on a file that does not parse."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    visitor = _Spans(wrapper.module)
    wrapper.visit(visitor)
    return visitor.spans
