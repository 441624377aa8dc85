"""Start the process group with gloo when the run has no CUDA, and keep NCCL (and its set-up) for CUDA runs."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import ParentNodeProvider, ScopeProvider

from distdoctor.patching.base import PatchCommand, PatchInfo
from distdoctor.patching.cstutil import (
    ancestors, assigned_names, ast_calls, ast_ident, ast_nodes, calls_to, is_none, lookup, enclosing_statement, get_arg, literal_text, mentions_cuda, parenthesize,
    qualified_names, walk,
)

PATCH = PatchInfo(
    id="gloo_backend",
    cause="nccl_without_cuda",
    title="Use gloo for process groups when the run has no CUDA; keep NCCL, device_id= and set_device for CUDA runs",
    risk="A CUDA run that silently falls back to gloo is slow; the condition keys on the run's device where the "
         "code has one, else on torch.cuda.is_available(), so a GPU run still gets NCCL.",
    env_var=None,
    prefilter=("nccl", "NCCL", "device_id"),
)

# function -> position of its `backend` parameter
TARGETS = {
    "torch.distributed.init_process_group": 0,
    "torch.distributed.distributed_c10d.init_process_group": 0,
    "torch.distributed.new_group": 2,
    "torch.distributed.distributed_c10d.new_group": 2,
}
TARGET_POSITIONS = {"init_process_group": 0, "new_group": 2}
NCCL_ONLY_KWARGS = ("device_id", "pg_options")
SET_DEVICE = {"torch.cuda.set_device"}
TORCH_DEVICE = {"torch.device"}
PLATFORM = {"os.name", "sys.platform", "platform.system", "platform.platform"}
NCCL, ALT, NEUTRAL, UNKNOWN = "nccl", "alt", "neutral", "unknown"
AVAILABLE_CALL = m.Call(func=m.Attribute(value=m.Attribute(value=m.Name("torch"), attr=m.Name("cuda")),
                                         attr=m.Name("is_available")), args=[])


def _ast_has_nccl(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "nccl" in sub.value.lower():
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "NCCL":
            return True
    return False


def _ast_nccl_idents(tree: ast.Module) -> set[str]:
    """Identifiers that may carry an NCCL backend: assigned, defaulted, passed or returned with one."""
    found: set[str] = set()
    # a function is named when a `return` with an NCCL value lies anywhere inside it: with no such return in
    # the whole file, no function needs its body walked
    nccl_returns = any(r.value is not None and _ast_has_nccl(r.value) for r in ast_nodes(tree, ast.Return))
    for node in ast_nodes(tree, ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef, ast.Call):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _ast_has_nccl(node.value):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for sub in ast.walk(target):
                    ident = ast_ident(sub)
                    if ident:
                        found.add(ident)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg, default in zip([*args.posonlyargs, *args.args][::-1], args.defaults[::-1]):
                if _ast_has_nccl(default):
                    found.add(arg.arg)
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                if default is not None and _ast_has_nccl(default):
                    found.add(arg.arg)
            if nccl_returns and any(isinstance(r, ast.Return) and r.value is not None and _ast_has_nccl(r.value)
                                    for r in ast.walk(node)):
                found.add(node.name)
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg and _ast_has_nccl(kw.value):
                    found.add(kw.arg)
            if ast_ident(node.func) == "add_argument" and any(kw.arg == "default" and _ast_has_nccl(kw.value)
                                                              for kw in node.keywords):
                for a in node.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                        found.add(a.value[2:].replace("-", "_"))
                found.update(kw.value.value for kw in node.keywords
                             if kw.arg == "dest" and isinstance(kw.value, ast.Constant))
    return found


def screen(tree: ast.Module) -> bool:
    """Cheap pre-check on Python's own parse: a call of init_process_group/new_group whose backend may be
    NCCL (a literal, or a name/attribute/call that something in the file gives an NCCL value), or that
    passes device_id= with gloo."""
    idents: set[str] | None = None
    for call in ast_calls(tree, set(TARGET_POSITIONS)):
        pos = TARGET_POSITIONS.get(ast_ident(call.func), 0)
        value = next((k.value for k in call.keywords if k.arg == "backend"), None)
        if value is None and len(call.args) > pos and not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
            value = call.args[pos]
        if value is None:
            if any(k.arg == "device_id" for k in call.keywords):
                return True  # the default backend with a device_id: gloo on a CPU, which refuses one
            continue
        if any(k.arg == "device_id" for k in call.keywords) or _ast_has_nccl(value):
            return True
        if idents is None:
            idents = _ast_nccl_idents(tree)
        if any(ast_ident(sub) in idents for sub in ast.walk(value)):
            return True
    return False


def _none_branch(value: cst.BaseExpression) -> bool:
    """A conditional expression with None on one side: device_id already chosen per device."""
    return isinstance(value, cst.IfExp) and (is_none(value.body) or is_none(value.orelse))


@dataclass
class _Wrap:
    stmts: set[int]  # ids of the original statements kept to the CUDA branch
    cond: str
    else_assign: bool  # give the assigned names a CPU value in an else branch


@dataclass
class _Index:
    """Values that can flow into a backend read from an attribute (`args.backend`, `self.backend`) or
    passed as a keyword argument; names are resolved through scopes instead."""

    names: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    attrs: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    returns: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)
    params: dict[str, list[cst.BaseExpression]] = field(default_factory=dict)  # parameter defaults by name

    def add(self, table: dict[str, list[cst.BaseExpression]], key: str, value: cst.BaseExpression) -> None:
        table.setdefault(key, []).append(value)


def _build_index(module: cst.Module) -> _Index:
    index = _Index()
    current_def: list[str] = []

    class Collector(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            current_def.append(node.name.value)

        def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
            current_def.pop()

        def visit_Return(self, node: cst.Return) -> None:
            if current_def and node.value is not None:
                index.add(index.returns, current_def[-1], node.value)

        def visit_Param(self, node: cst.Param) -> None:
            if node.default is not None:
                index.add(index.attrs, node.name.value, node.default)
                index.add(index.params, node.name.value, node.default)

        def _target(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
            if isinstance(target, cst.Name):
                index.add(index.attrs, target.value, value)
            elif isinstance(target, cst.Attribute):
                index.add(index.attrs, target.attr.value, value)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                self._target(target.target, node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if node.value is not None:
                self._target(node.target, node.value)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            fname = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
            if fname in ("init_process_group", "new_group"):
                return
            kwargs = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
            if fname == "add_argument" and "default" in kwargs:
                dest = kwargs.get("dest")
                dest_name = literal_text(dest) if dest is not None else None
                for arg in node.args:
                    text = literal_text(arg.value) if arg.keyword is None else None
                    if text and text.startswith("--") and dest_name is None:
                        dest_name = text[2:].replace("-", "_")
                if dest_name:
                    index.add(index.attrs, dest_name, kwargs["default"])
                return
            for key, value in kwargs.items():
                index.add(index.names, key, value)
                index.add(index.attrs, key, value)

    module.visit(Collector())
    return index


def _literal_kind(text: str) -> str:
    low = text.lower()
    if "nccl" in low:
        return NCCL
    if any(b in low for b in ("gloo", "mpi", "ucc", "xccl", "hccl")):
        return ALT
    return NEUTRAL


def _combine(kinds: set[str]) -> str:
    if ALT in kinds:
        return ALT
    if NCCL in kinds:
        return NCCL
    return UNKNOWN


def _with_quote(like: cst.BaseExpression | None, text: str) -> cst.SimpleString:
    quote = "'" if isinstance(like, cst.SimpleString) and like.value.lstrip("rRbBuU").startswith("'") else '"'
    return cst.SimpleString(f"{quote}{text}{quote}")


def _strip_args(call: cst.Call, drop: tuple[str, ...]) -> cst.Call:
    args = [a for a in call.args if not (a.keyword is not None and a.keyword.value in drop)]
    if args and len(args) != len(call.args):
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


class _ReplaceNode(cst.CSTTransformer):
    def __init__(self, target: cst.CSTNode, build) -> None:
        super().__init__()
        self.target, self.build = target, build

    def on_leave(self, original_node, updated_node):
        return self.build(updated_node) if original_node is self.target else updated_node


class Transformer(PatchCommand):
    """Rewrite NCCL process-group starts so that runs without CUDA use gloo."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (ParentNodeProvider,)  # the rest resolved on demand

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self._index: _Index | None = None
        self.module_node: cst.Module | None = None
        self.arg_edits: dict[int, cst.Arg] = {}
        self.if_edits: dict[int, tuple[cst.BaseExpression, list[cst.BaseStatement]]] = {}
        self.wraps: dict[int, list[_Wrap]] = {}
        self.torch_bound = False
        self.needs_torch = False

    # ---- analysis (original tree) ----
    @property
    def index(self) -> _Index:
        if self._index is None:  # built only when a backend comes from an attribute or a parameter
            self._index = _build_index(self.module_node)
        return self._index

    def visit_Module(self, node: cst.Module) -> bool:
        self.module_node = node
        for call in calls_to(self, TARGETS.keys()):
            self._plan_call(call)
        if not (self.arg_edits or self.if_edits or self.wraps):
            return False  # nothing to rewrite: skip the traversal
        for stmt in node.body:
            if m.matches(stmt, m.SimpleStatementLine(body=[m.Import()])):
                for alias in stmt.body[0].names:
                    if alias.asname is None and (cst.helpers.get_full_name_for_node(alias.name) or "").split(".")[0] == "torch":
                        self.torch_bound = True
        return True

    def _plan_call(self, node: cst.Call) -> None:
        names = qualified_names(self, node.func) & TARGETS.keys()
        if not names:
            return
        arg = get_arg(node, "backend", TARGETS[next(iter(names))])
        if arg is None:
            self._plan_default_device_id(node)
            return
        if self._classify(arg.value) != NCCL:
            self._plan_cuda_device_id(node)
            return
        chain_has_gloo = False
        cuda_if: cst.If | None = None
        child: cst.CSTNode = node
        for parent in ancestors(self, node):
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(parent, cst.If):
                top = self._chain_top(parent)
                if self._device_keyed_chain(top) and any("gloo" in s for s in self._strings(top)):
                    chain_has_gloo = True  # a branch on the device/CUDA already starts gloo
                if cuda_if is None and child is parent.body and self._cpu_test(parent.test) is not None:
                    cuda_if = parent
            child = parent
        if chain_has_gloo:
            return
        if cuda_if is not None:
            self._plan_cpu_branch(cuda_if, node, arg)
        else:
            self._plan_inline(node, arg)

    def _device_keyed_chain(self, top: cst.If) -> bool:
        """Some test of the if/elif chain looks at CUDA, the device or GPUs (not, say, a CLI variant)."""
        node: cst.CSTNode | None = top
        while isinstance(node, cst.If):
            if mentions_cuda(node.test) or any(
                    isinstance(n, cst.Name) and any(k in n.value.lower() for k in ("device", "gpu", "cpu", "cuda"))
                    for n in walk(node.test)) or any(s in ("cpu", "cuda") for s in self._strings(node.test)):
                return True
            node = node.orelse
        return False

    def _plan_cuda_device_id(self, call: cst.Call) -> None:
        """gloo with `device_id=<a CUDA device>` raises on a machine without one: keep it for CUDA runs."""
        arg = get_arg(call, "device_id")
        if arg is None or not mentions_cuda(arg.value) or _none_branch(arg.value):
            return
        self._device_id_none_on_cpu(call, arg, "device_id (a CUDA device) -> None unless {cond}")

    def _device_id_none_on_cpu(self, call: cst.Call, arg: cst.Arg, note: str) -> str:
        """`device_id=X` becomes `X if torch.cuda.is_available() else None`; returns that condition."""
        self.needs_torch = True
        cond = "torch.cuda.is_available()"
        self.arg_edits[id(arg)] = arg.with_changes(value=cst.IfExp(
            test=cst.parse_expression(cond), body=parenthesize(arg.value), orelse=cst.Name("None")))
        self.record(call, note.format(cond=cond))
        return cond

    def _plan_default_device_id(self, call: cst.Call) -> None:
        """No backend (the device's default: gloo on a CPU) with `device_id=`: gloo refuses any device_id
        there (`ValueError: init_process_group device_id parameter must be an accelerator with an index`), and
        the torch.cuda.set_device() beside it raises too: both kept to CUDA runs."""
        arg = get_arg(call, "device_id")
        stmt = enclosing_statement(self, call)
        if arg is None or stmt is None or is_none(arg.value) or _none_branch(arg.value):
            return
        cond = self._device_id_none_on_cpu(call, arg, "device_id -> None unless {cond} (the default backend is "
                                                      "gloo on a CPU)")
        self._plan_wraps(stmt, cond)
        for top in self._variant_chains(stmt):
            self._plan_wraps(top, cond)

    def _strings(self, node: cst.CSTNode) -> list[str]:
        return [t.lower() for t in (literal_text(s) for s in walk(node)
                                     if isinstance(s, (cst.SimpleString, cst.FormattedString))) if t is not None]

    def _chain_top(self, node: cst.If) -> cst.If:
        top = node
        for parent in ancestors(self, node):
            if isinstance(parent, cst.If) and parent.orelse is top:
                top = parent
            else:
                break
        return top

    def _classify(self, expr: cst.BaseExpression, depth: int = 0) -> str:
        if depth > 5:
            return UNKNOWN
        text = literal_text(expr)
        if isinstance(expr, cst.FormattedString) and _literal_kind(text) != NCCL:
            fields = {self._classify(p.expression, depth + 1) for p in expr.parts
                      if isinstance(p, cst.FormattedStringExpression)}
            if NCCL in fields:  # f"cuda:{kind},cpu:gloo" with kind = "nccl"
                return NCCL
        if text is not None:
            return _literal_kind(text)
        if isinstance(expr, cst.IfExp):
            if is_none(expr.body) or is_none(expr.orelse):  # `"nccl" if opts else None`: None = the device's default
                return ALT
            kinds = {self._classify(expr.body, depth + 1), self._classify(expr.orelse, depth + 1)}
            if NCCL in kinds and self._platform_test(expr.test):
                return NCCL  # `"gloo" if os.name == "nt" else "nccl"`: NCCL on every Linux machine, GPU or not
            return _combine(kinds)
        if isinstance(expr, cst.BooleanOperation):
            return _combine({self._classify(expr.left, depth + 1), self._classify(expr.right, depth + 1)})
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("NCCL", "GLOO"):
            return NCCL if expr.attr.value == "NCCL" else ALT
        values: list[cst.BaseExpression | None] = []
        if isinstance(expr, cst.Name):
            values = self._name_values(expr)
        elif isinstance(expr, cst.Attribute):
            values = self.index.attrs.get(expr.attr.value, [])
        elif isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name):
                values = list(self.index.returns.get(func.value, []))
            values += [a.value for a in expr.args]
        elif isinstance(expr, cst.Subscript):
            values = [expr.value]
        return _combine({UNKNOWN if v is None else self._classify(v, depth + 1) for v in values if v is not expr})

    def _platform_test(self, test: cst.BaseExpression) -> bool:
        """The test reads the operating system (os.name, sys.platform, platform.system()) and not CUDA."""
        return not mentions_cuda(test) and any(
            qualified_names(self, n) & PLATFORM for n in walk(test) if isinstance(n, (cst.Attribute, cst.Name)))

    def _name_values(self, name: cst.Name) -> list[cst.BaseExpression | None]:
        """What a name can hold where it is read: its assignments in scope, or a parameter's default and
        the keyword arguments passed for it."""
        try:
            scope = lookup(self, ScopeProvider, name)
        except KeyError:
            return []
        if scope is None:
            return []
        values: list[cst.BaseExpression | None] = []
        for assignment in scope[name.value]:
            node = getattr(assignment, "node", None)
            if isinstance(node, cst.Param):
                if node.default is not None:
                    values.append(node.default)
                passed = self.index.names.get(name.value, [])
                values += passed
                if node.default is None and not passed:
                    # a worker's parameter filled positionally by a launcher of this file that has the same
                    # parameter with a default (`launch(..., backend="nccl")` -> `_worker(rank, backend)`)
                    values += [v for v in self.index.params.get(name.value, []) if v is not node.default]
                continue
            parent = self.get_metadata(ParentNodeProvider, node, None) if node is not None else None
            if isinstance(parent, cst.AssignTarget):
                parent = self.get_metadata(ParentNodeProvider, parent, None)
            if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is not None:
                values.append(parent.value)
            else:
                values.append(None)
        return values

    # ---- the run's device ----
    def _cond(self, stmt: cst.BaseStatement) -> str:
        """`device_type == "cuda"` / `"cuda" in str(device)` when the code set the run's device before
        this statement; otherwise torch.cuda.is_available()."""
        seen: dict[str, bool] = {}
        child: cst.CSTNode = stmt
        for parent in ancestors(self, stmt):
            if isinstance(parent, (cst.IndentedBlock, cst.Module)):
                body = list(parent.body)
                if child in body:
                    for sibling in body[: body.index(child)]:
                        if child is stmt and self._is_cuda_setup(sibling):
                            continue  # kept to the CUDA branch by this patch: not the run's device
                        for name in assigned_names(sibling):
                            seen[name] = True
            if isinstance(parent, cst.FunctionDef):
                for param in (*parent.params.params, *parent.params.kwonly_params, *parent.params.posonly_params):
                    seen[param.name.value] = True
                break
            if isinstance(parent, cst.ClassDef):
                break
            child = parent
        if "device_type" in seen:
            return 'device_type == "cuda"'
        if "device" in seen:
            return '"cuda" in str(device)'
        self.needs_torch = True
        return "torch.cuda.is_available()"

    def _cpu_test(self, test: cst.BaseExpression) -> cst.BaseExpression | None:
        """For a test that selects CUDA, the test that selects the CPU instead; None otherwise."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            left = self._cpu_test(test.left)
            if left is not None:
                return test.with_changes(left=left)
            right = self._cpu_test(test.right)
            return test.with_changes(right=right) if right is not None else None
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if isinstance(target.operator, cst.Equal):
                if (literal_text(target.comparator) or "").lower() == "cuda":
                    return test.with_changes(comparisons=[target.with_changes(
                        comparator=_with_quote(target.comparator, "cpu"))])
                if (literal_text(test.left) or "").lower() == "cuda":
                    return test.with_changes(left=_with_quote(test.left, "cpu"))
            if isinstance(target.operator, cst.In) and (literal_text(test.left) or "").lower() == "cuda":
                return test.with_changes(comparisons=[target.with_changes(operator=cst.NotIn())])
            return None
        if isinstance(test, cst.Call):
            if qualified_names(self, test.func) & {"torch.cuda.is_available"} or (
                    m.matches(test.func, m.Attribute(attr=m.Name("startswith")))
                    and test.args and (literal_text(test.args[0].value) or "").lower() == "cuda"):
                return cst.UnaryOperation(operator=cst.Not(), expression=test)
        return None

    # ---- planning ----
    def _gloo_call(self, call: cst.Call, position: int) -> cst.Call:
        new_args = [a.with_changes(value=_with_quote(a.value, "gloo")) if i == position else a
                    for i, a in enumerate(call.args)]
        return _strip_args(call.with_changes(args=new_args), NCCL_ONLY_KWARGS)

    def _plan_cpu_branch(self, cuda_if: cst.If, call: cst.Call, arg: cst.Arg) -> None:
        if not isinstance(cuda_if.body, cst.IndentedBlock):
            return
        end = cuda_if
        while isinstance(end.orelse, cst.If):
            end = end.orelse
        if id(end) in self.if_edits:
            return
        else_body: list[cst.BaseStatement] = []
        if isinstance(end.orelse, cst.Else):
            block = end.orelse.body
            else_body = list(block.body) if isinstance(block, cst.IndentedBlock) else [
                cst.SimpleStatementLine(body=list(block.body))]
        body = list(else_body)
        for stmt in cuda_if.body.body:
            if any(sub is call for sub in walk(stmt)):
                position = list(call.args).index(arg)
                body.append(stmt.visit(_ReplaceNode(call, lambda updated: self._gloo_call(updated, position))))
            elif not mentions_cuda(stmt):
                body.append(stmt)
            elif not else_body and self._cuda_value_assign(stmt):
                body.append(self._cpu_assign(stmt))
        test = self._cpu_test(cuda_if.test)
        self.if_edits[id(end)] = (test, body)
        self.record(call, f"added a CPU branch `elif {cst.Module([]).code_for_node(test)}:` that starts gloo")

    def _plan_inline(self, call: cst.Call, arg: cst.Arg) -> None:
        stmt = enclosing_statement(self, call)
        if stmt is None:
            return
        cond = self._cond(stmt)
        old = cst.Module([]).code_for_node(arg.value)
        new_value = cst.IfExp(test=cst.parse_expression(cond), body=parenthesize(arg.value),
                              orelse=_with_quote(arg.value, "gloo"))
        self.arg_edits[id(arg)] = arg.with_changes(value=new_value)
        for other in call.args:
            if other.keyword is not None and other.keyword.value in NCCL_ONLY_KWARGS:
                self.arg_edits[id(other)] = other.with_changes(value=cst.IfExp(
                    test=cst.parse_expression(cond), body=parenthesize(other.value), orelse=cst.Name("None")))
        self.record(call, f"backend {old} -> gloo unless {cond}")
        self._plan_wraps(stmt, cond)
        outer = self._variant_chains(stmt)  # `if windows: gloo else: nccl` / `try: nccl`, then set_device(rank)
        if outer:
            self.needs_torch = True  # the device may be bound after the outer set-up: test CUDA itself
        for top in outer:
            self._plan_wraps(top, "torch.cuda.is_available()")

    def _variant_chains(self, stmt: cst.CSTNode) -> list[cst.CSTNode]:
        """The statements that hold `stmt` directly (one inside the other) and run the set-up beside them on
        every path, the CPU run's too: a `try:` or `with` around the start, or the top of an if/elif chain that
        picks the backend (starts a process group in more than one branch) and does not test CUDA or the
        device. (`if ddp: init_process_group(...)` is no such chain.)"""
        tops: list[cst.CSTNode] = []
        node = stmt
        while True:
            block = self.get_metadata(ParentNodeProvider, node, None)
            owner = self.get_metadata(ParentNodeProvider, block, None) if isinstance(block, cst.IndentedBlock) else None
            if isinstance(owner, (cst.Try, cst.With)) and owner.body is block:
                tops.append(owner)
                node = owner
                continue
            if isinstance(owner, cst.Else):
                owner = self.get_metadata(ParentNodeProvider, owner, None)
            if not isinstance(owner, cst.If):
                return tops
            top = self._chain_top(owner)
            starts = [c for c in walk(top) if isinstance(c, cst.Call) and qualified_names(self, c.func) & TARGETS.keys()]
            if self._device_keyed_chain(top) or len(starts) < 2:
                return tops
            tops.append(top)
            node = top

    def _cuda_value_assign(self, stmt: cst.CSTNode) -> bool:
        """`x = "cuda..."`, `x = f"cuda:{i}"` or `x = torch.device("cuda", i)`."""
        if not m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])):
            return False
        value = stmt.body[0].value
        text = literal_text(value)
        if text is not None:
            return text.lower().startswith("cuda")
        if isinstance(value, cst.Call) and qualified_names(self, value.func) & TORCH_DEVICE and value.args:
            return (literal_text(value.args[0].value) or "").lower().startswith("cuda")
        return False

    def _cpu_assign(self, stmt: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        assign = stmt.body[0]
        cpu = (cst.parse_expression('torch.device("cpu")') if isinstance(assign.value, cst.Call)
               else _with_quote(assign.value, "cpu"))
        return stmt.with_changes(body=[assign.with_changes(value=cpu)])

    def _is_set_device(self, stmt: cst.CSTNode) -> bool:
        return m.matches(stmt, m.SimpleStatementLine(body=[m.Expr(value=m.Call())])) and bool(
            qualified_names(self, stmt.body[0].value.func) & SET_DEVICE)

    def _is_cuda_setup(self, stmt: cst.CSTNode) -> bool:
        return self._is_set_device(stmt) or self._cuda_value_assign(stmt) or self._guarded_set_device(stmt)

    def _guarded_set_device(self, stmt: cst.CSTNode) -> bool:
        """`if torch.cuda.is_available(): torch.cuda.set_device(i)` (cuda_calls_cpu's guard, or the user's):
        merged into the CUDA branch with the set-up beside it instead of a second `if` of its own."""
        return isinstance(stmt, cst.If) and stmt.orelse is None and m.matches(stmt.test, AVAILABLE_CALL) \
            and isinstance(stmt.body, cst.IndentedBlock) and all(self._is_set_device(s) for s in stmt.body.body)

    def _plan_wraps(self, stmt: cst.BaseStatement, cond: str) -> None:
        try:
            block = self.get_metadata(ParentNodeProvider, stmt)
        except KeyError:
            return
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return
        setup = [s for s in block.body if s is not stmt and self._is_cuda_setup(s)]
        if not setup or cond == "torch.cuda.is_available()" and all(self._guarded_set_device(s) for s in setup):
            return  # nothing, or only set_device already under this very test
        ids = {id(s) for s in setup}
        for wrap in self.wraps.get(id(block), []):
            ids -= wrap.stmts
        if ids:
            self.wraps.setdefault(id(block), []).append(
                _Wrap(ids, cond, else_assign=cond == "torch.cuda.is_available()"))

    # ---- rewriting (updated tree) ----
    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        edit = self.arg_edits.get(id(original_node))
        return edit if edit is not None else updated_node

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        edit = self.if_edits.get(id(original_node))
        if edit is None:
            return updated_node
        test, body = edit
        branch = cst.If(test=test, body=cst.IndentedBlock(body=body), orelse=updated_node.orelse)
        return updated_node.with_changes(orelse=branch)

    def _apply_wraps(self, original, updated):
        plans = self.wraps.get(id(original))
        if not plans or len(original.body) != len(updated.body):
            return updated
        out: list[cst.BaseStatement] = []
        i, n = 0, len(original.body)
        while i < n:
            plan = next((p for p in plans if id(original.body[i]) in p.stmts), None)
            if plan is None:
                out.append(updated.body[i])
                i += 1
                continue
            run, first = [], original.body[i]
            while i < n and id(original.body[i]) in plan.stmts:
                run.append(updated.body[i])
                i += 1
            out.append(self._guard(run, plan, first))
        return updated.with_changes(body=out)

    def _guard(self, run: list[cst.BaseStatement], plan: _Wrap, first: cst.BaseStatement) -> cst.If:
        leading = run[0].leading_lines
        run = [inner for s in run for inner in (
            [b.with_changes(leading_lines=s.leading_lines if i == 0 else b.leading_lines)
             for i, b in enumerate(s.body.body)] if isinstance(s, cst.If) and s.orelse is None
            and m.matches(s.test, AVAILABLE_CALL) and isinstance(s.body, cst.IndentedBlock) else [s])]
        run[0] = run[0].with_changes(leading_lines=())
        orelse = None
        if plan.else_assign:
            cpu = [self._cpu_assign(s) for s in run if self._cuda_value_assign_updated(s)]
            if cpu:
                orelse = cst.Else(body=cst.IndentedBlock(body=[s.with_changes(leading_lines=()) for s in cpu]))
        self.record(first, f"kept {len(run)} CUDA set-up statement(s) to the CUDA branch (if {plan.cond})")
        return cst.If(test=cst.parse_expression(plan.cond), body=cst.IndentedBlock(body=run), orelse=orelse,
                      leading_lines=leading)

    def _cuda_value_assign_updated(self, stmt: cst.CSTNode) -> bool:
        if not m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])):
            return False
        value = stmt.body[0].value
        text = literal_text(value)
        if text is not None:
            return text.lower().startswith("cuda")
        return m.matches(value, m.Call(func=m.Attribute(value=m.Name("torch"), attr=m.Name("device")))) and bool(
            value.args) and (literal_text(value.args[0].value) or "").lower().startswith("cuda")

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock):
        return self._apply_wraps(original_node, updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self.needs_torch and not self.torch_bound and (self.arg_edits or self.wraps):
            AddImportsVisitor.add_needed_import(self.context, "torch")
        return self._apply_wraps(original_node, updated_node)


VALID = [
    # already has a gloo branch
    'import torch\nimport torch.distributed as dist\n'
    'dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")\n',
    'import torch.distributed as dist\nbackend = "nccl" if use_cuda else "gloo"\ndist.init_process_group(backend=backend)\n',
    'import torch\nimport torch.distributed as dist\nif torch.cuda.is_available():\n    dist.init_process_group("nccl")\n'
    'else:\n    dist.init_process_group("gloo")\n',
    # gloo or the default backend already
    'import torch.distributed as dist\ndist.init_process_group("gloo")\ndist.init_process_group()\n',
    # not torch's init_process_group
    'from mylib import init_process_group\ninit_process_group("nccl")\n',
    # nanochat with its CPU branch already in place
    'import torch.distributed as dist\n\ndef compute_init(device_type):\n'
    '    if ddp and device_type == "cuda":\n        dist.init_process_group(backend="nccl")\n'
    '    elif ddp and device_type == "cpu":\n        dist.init_process_group(backend="gloo")\n',
]

INVALID = [
    (
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n',
        'import torch.distributed as dist\nimport torch\n\n'
        'dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")\n',
    ),
    (   # nanoGPT: backend from a config variable, keyed on the configured device; CUDA set-up kept to CUDA
        "import torch\nfrom torch.distributed import init_process_group\n\nbackend = 'nccl'\ndevice = 'cuda'\n"
        "if ddp:\n    init_process_group(backend=backend)\n    device = f'cuda:{ddp_local_rank}'\n"
        "    torch.cuda.set_device(device)\n",
        "import torch\nfrom torch.distributed import init_process_group\n\nbackend = 'nccl'\ndevice = 'cuda'\n"
        "if ddp:\n    init_process_group(backend=backend if \"cuda\" in str(device) else \"gloo\")\n"
        "    if \"cuda\" in str(device):\n        device = f'cuda:{ddp_local_rank}'\n"
        "        torch.cuda.set_device(device)\n",
    ),
    (   # nanochat compute_init: add the CPU branch that starts gloo (device_id= stays NCCL-only)
        'import torch\nimport torch.distributed as dist\n\ndef compute_init(device_type="cuda"):\n'
        '    if ddp and device_type == "cuda":\n        device = torch.device("cuda", local_rank)\n'
        '        torch.cuda.set_device(device)\n        dist.init_process_group(backend="nccl", device_id=device)\n'
        '        dist.barrier()\n    else:\n        device = torch.device(device_type)\n    return device\n',
        'import torch\nimport torch.distributed as dist\n\ndef compute_init(device_type="cuda"):\n'
        '    if ddp and device_type == "cuda":\n        device = torch.device("cuda", local_rank)\n'
        '        torch.cuda.set_device(device)\n        dist.init_process_group(backend="nccl", device_id=device)\n'
        '        dist.barrier()\n    elif ddp and device_type == "cpu":\n        device = torch.device(device_type)\n'
        '        dist.init_process_group(backend="gloo")\n        dist.barrier()\n'
        '    else:\n        device = torch.device(device_type)\n    return device\n',
    ),
    (   # DDP tutorial: set_device before init; the device falls back to the CPU outside CUDA
        'import os\nimport torch\nfrom torch.distributed import init_process_group\n\ndef ddp_setup():\n'
        '    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n'
        '    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))\n'
        '    init_process_group(backend="nccl", device_id=device)\n',
        'import os\nimport torch\nfrom torch.distributed import init_process_group\n\ndef ddp_setup():\n'
        '    if torch.cuda.is_available():\n        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n'
        '        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))\n'
        '    else:\n        device = torch.device("cpu")\n'
        '    init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo", '
        'device_id=device if torch.cuda.is_available() else None)\n',
    ),
    (   # issue 7: compound string, attribute from argparse, parameter default, positional, call expression
        'import torch\nimport torch.distributed as dist\n\nparser.add_argument("--dist-backend", default="nccl")\n\n'
        'def pick():\n    return os.environ.get("BACKEND", "nccl")\n\ndef init(backend="nccl"):\n'
        '    dist.init_process_group(backend, timeout=t)\n    a = dist.new_group(backend="cpu:gloo,cuda:nccl")\n'
        '    b = dist.new_group(backend=args.dist_backend)\n    c = dist.new_group(backend=pick())\n',
        'import torch\nimport torch.distributed as dist\n\nparser.add_argument("--dist-backend", default="nccl")\n\n'
        'def pick():\n    return os.environ.get("BACKEND", "nccl")\n\ndef init(backend="nccl"):\n'
        '    dist.init_process_group(backend if torch.cuda.is_available() else "gloo", timeout=t)\n'
        '    a = dist.new_group(backend="cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo")\n'
        '    b = dist.new_group(backend=args.dist_backend if torch.cuda.is_available() else "gloo")\n'
        '    c = dist.new_group(backend=pick() if torch.cuda.is_available() else "gloo")\n',
    ),
]
