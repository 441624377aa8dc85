"""Make `Work.get_future()` work on gloo, which lacks it for reduce_scatter* and isend/irecv.

Measured here (torch 2.13.0+cpu, gloo, 2 ranks): `get_future()` raises
`RuntimeError: Work::getFuture not implemented.` (and `work.result()` raises
`RuntimeError: result() not implemented.`) for reduce_scatter, reduce_scatter_tensor,
reduce_scatter_single, _reduce_scatter_base, isend, irecv and the Works of batch_isend_irecv;
all_reduce, broadcast, reduce, all_gather, all_gather_into_tensor, all_gather_single, gather,
scatter, all_to_all, all_to_all_single and barrier return a working future and are left alone.

Each `<collective>(out, ...).get_future()` (chained, or through a variable that holds the Work)
becomes `_distdoctor_future(<collective>(out, ...), out)`. The helper, inserted once after the
imports, returns `work.get_future()` where the backend has it (NCCL) and otherwise waits on the
Work and returns a completed `torch.futures.Future` holding `[out]`, the value NCCL's future
holds, so `.wait()`, `.value()`, `.then()` and `torch.futures.collect_all()` keep working.
Field report: nanochat-cpu-gloo-ddp.md (bug 3, DistMuonAdamW on gloo).
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider, QualifiedNameProvider, ScopeProvider

from distdoctor.patching.base import PatchCommand, PatchInfo
from distdoctor.patching.cstutil import ast_aliases, ast_ident, ast_nodes

PATCH = PatchInfo(
    id="gloo_future_shim",
    cause="gloo_missing_feature",
    title="Wrap get_future() of gloo-unsupported async collectives in a helper that falls back to a completed Future",
    risk="On gloo the communication no longer overlaps with computation (the helper waits at once); through a "
         "variable, the output expression is read where get_future() was called, so it must still name the same "
         "tensor there.",
    prefilter=("get_future",),
)

HELPER = "_distdoctor_future"

# The first argument of each is the tensor the operation fills (or sends).
_OUTPUT_ARG = {
    "reduce_scatter": "output",
    "reduce_scatter_tensor": "output",
    "reduce_scatter_single": "output",
    "_reduce_scatter_base": "output",
    "isend": "tensor",
    "irecv": "tensor",
}
_QUALIFIED = {
    f"{mod}.{fn}": kw
    for mod in ("torch.distributed", "torch.distributed.distributed_c10d")
    for fn, kw in _OUTPUT_ARG.items()
}

_HELPER_SOURCE = f'''def {HELPER}(work, output):
    """work.get_future(), or where the backend lacks it (gloo: reduce_scatter*, isend/irecv) a completed Future of [output]."""
    try:
        return work.get_future()
    except RuntimeError as exc:
        if "not implemented" not in str(exc):
            raise
    work.wait()
    fut = torch.futures.Future()
    fut.set_result([output])
    return fut
'''


def screen(tree: ast.Module) -> bool:
    """Cheap pre-check on Python's own parse: `.get_future()` called on one of the collectives whose Work
    lacks it on gloo, chained or through a name assigned from such a call."""
    if not any(isinstance(n.func, ast.Attribute) and n.func.attr == "get_future" for n in ast_nodes(tree, ast.Call)):
        return False  # no `.get_future()` call anywhere: no scope below can have one (skips the scope walk)
    wanted = ast_aliases(tree, set(_OUTPUT_ARG))  # from torch.distributed import reduce_scatter_tensor as rs

    def unsupported(expr: ast.AST) -> bool:
        return isinstance(expr, ast.Call) and ast_ident(expr.func) in wanted

    def works_in(scope: list[ast.AST]) -> set[str]:
        return {t.id for n in scope if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None
                and unsupported(n.value) for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)}

    scopes = _ast_scopes(tree)
    module_works = works_in(scopes[-1])
    for scope in scopes:  # a Work variable is looked up in its own function (or the module), as the Transformer does
        works = works_in(scope) | module_works
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get_future"
               and (unsupported(n.func.value) or (isinstance(n.func.value, ast.Name) and n.func.value.id in works))
               for n in scope):
            return True
    return False


def _ast_scopes(tree: ast.Module) -> list[list[ast.AST]]:
    """The nodes of the module and of each function, each list without the nested functions' nodes."""
    scopes: list[list[ast.AST]] = []

    def collect(root: ast.AST) -> None:
        nodes: list[ast.AST] = []
        stack = list(ast.iter_child_nodes(root))
        while stack:
            node = stack.pop()
            nodes.append(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                collect(node)
            else:
                stack.extend(ast.iter_child_nodes(node))
        scopes.append(nodes)

    collect(tree)
    return scopes


_GET_FUTURE = m.Call(func=m.Attribute(attr=m.Name("get_future")), args=[])


def get_specific_arg(call: cst.Call, name: str, pos: int) -> cst.Arg | None:
    """The argument of `call` passed as keyword `name` or at position `pos`."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[pos] if pos < len(positional) else None


def is_plain_reference(expr: cst.BaseExpression) -> bool:
    """True for names, attribute chains and constant subscripts, which can be read twice safely."""
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        return is_plain_reference(expr.value)
    if isinstance(expr, cst.Subscript):
        for element in expr.slice:
            index = element.slice
            if not isinstance(index, cst.Index) or not (
                isinstance(index.value, (cst.Integer, cst.SimpleString)) or is_plain_reference(index.value)
            ):
                return False
        return is_plain_reference(expr.value)
    return False


def has_toplevel_def(module: cst.Module, name: str) -> bool:
    return any(isinstance(s, cst.FunctionDef) and s.name.value == name for s in module.body)


def insert_after_imports(module: cst.Module, statement: cst.BaseStatement) -> cst.Module:
    """Insert `statement` after the module's leading docstring/import block, with blank lines around it."""
    body = list(module.body)
    index = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) or (i == 0 and m.matches(s, m.Expr(m.SimpleString())))
            for s in stmt.body
        ):
            index = i + 1
        elif isinstance(stmt, cst.Try) and m.findall(stmt.body, m.Import() | m.ImportFrom()) and not m.findall(
            stmt.body, m.FunctionDef() | m.ClassDef()
        ):
            index = i + 1  # try: import x / except ImportError: ... belongs to the import block
        else:
            break
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    statement = statement.with_changes(leading_lines=blank if index else [])
    if index < len(body):
        nxt = body[index]
        lines = list(nxt.leading_lines)
        have = next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))
        if have < 2:
            body[index] = nxt.with_changes(leading_lines=[cst.EmptyLine()] * (2 - have) + lines)
    body.insert(index, statement)
    return module.with_changes(body=body)


class Transformer(PatchCommand):
    """Route get_future() of reduce_scatter*/isend/irecv Works through a helper that works on gloo."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ScopeProvider)

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self._work_vars: dict[cst.Name, cst.BaseExpression | None] = {}  # assigned Name -> output expr
        self._rewrote = False

    # -- detection ---------------------------------------------------------------------------
    def _unsupported_output(self, call: cst.CSTNode) -> tuple[bool, cst.BaseExpression | None]:
        """(is a gloo-unsupported collective, its output expression if safely re-readable)."""
        if not isinstance(call, cst.Call):
            return False, None
        names = self.get_metadata(QualifiedNameProvider, call.func, set())
        for qn in names:
            keyword = _QUALIFIED.get(qn.name)
            if keyword is not None:
                arg = get_specific_arg(call, keyword, 0)
                if arg is not None and is_plain_reference(arg.value):
                    return True, arg.value
                return True, None
        return False, None

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            hit, output = self._unsupported_output(node.value)
            if hit:
                self._work_vars[node.targets[0].target] = output

    def _variable_output(self, name: cst.Name) -> cst.BaseExpression | None:
        """The output expression of the Work a variable holds, when every binding that reaches it is one."""
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None:
            return None
        outputs = []
        for access in scope.accesses[name.value]:
            if access.node is not name:
                continue
            if not access.referents:
                return None
            for assignment in access.referents:
                node = getattr(assignment, "node", None)
                if node not in self._work_vars or self._work_vars[node] is None:
                    return None
                outputs.append(self._work_vars[node])
        if not outputs or any(not o.deep_equals(outputs[0]) for o in outputs):
            return None
        return outputs[0]

    # -- rewrite -----------------------------------------------------------------------------
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not m.matches(original_node, _GET_FUTURE):
            return updated_node
        receiver = original_node.func.value
        hit, output = self._unsupported_output(receiver)
        if hit and output is None:
            return updated_node  # output is an expression with side effects: leave it to a person
        if not hit and isinstance(receiver, cst.Name):
            output = self._variable_output(receiver)
        if output is None:
            return updated_node
        work = updated_node.func.value
        if isinstance(work, cst.Call):
            what = f"{cst.Module([]).code_for_node(work.func)}(...).get_future() -> {HELPER}(..., {cst.Module([]).code_for_node(output)})"
        else:
            what = f"{work.value}.get_future() -> {HELPER}({work.value}, {cst.Module([]).code_for_node(output)})"
        self.record(original_node, what)
        self._rewrote = True
        return cst.Call(
            func=cst.Name(HELPER),
            args=[cst.Arg(work.with_changes(lpar=[], rpar=[]) if isinstance(work, cst.Call) else work,
                          comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                  cst.Arg(output.deep_clone())],
            lpar=updated_node.lpar,
            rpar=updated_node.rpar,
        )

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self._rewrote or has_toplevel_def(updated_node, HELPER):
            return updated_node
        AddImportsVisitor.add_needed_import(self.context, "torch")
        helper = cst.parse_statement(_HELPER_SOURCE, config=updated_node.config_for_parsing)
        return insert_after_imports(updated_node, helper)


VALID = [
    # all_reduce / all_gather_into_tensor have a working future on gloo: untouched
    "import torch.distributed as dist\n"
    "fut = dist.all_reduce(t, async_op=True).get_future()\n"
    "futs = [dist.all_gather_into_tensor(o, p, async_op=True).get_future() for o, p in pairs]\n",
    # a get_future() that is not a Work's
    "def f(x):\n    return x.get_future()\n",
    # a reduce_scatter whose output is computed in place cannot be read twice: left to a person
    "import torch.distributed as dist\n"
    "fut = dist.reduce_scatter_tensor(torch.empty(4), g, async_op=True).get_future()\n",
]

INVALID = [
    (
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "fut = dist.reduce_scatter_tensor(out, g, async_op=True).get_future()\n",
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "\n" + _HELPER_SOURCE + "\n\n"
        "fut = _distdoctor_future(dist.reduce_scatter_tensor(out, g, async_op=True), out)\n",
    ),
    (
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "def step(out, g):\n"
        "    work = dist.isend(out, 1)\n"
        "    return work.get_future().then(lambda f: f.value())\n",
        "import torch.distributed as dist\n"
        "import torch\n"
        "\n"
        "\n" + _HELPER_SOURCE + "\n\n"
        "def step(out, g):\n"
        "    work = dist.isend(out, 1)\n"
        "    return _distdoctor_future(work, out).then(lambda f: f.value())\n",
    ),
]
