"""Add a `<PREFIX>_FORCE_SDPA=1` escape hatch where a model picks a flash-attention kernel.

A model that chooses flash-attn from `torch.cuda.is_available()`, an import probe, a `HAS_FLASH`
flag, the tensor's device/dtype or a config value runs the CUDA kernel on a CPU run (or fails to
import it). Only files that import or load a flash-attention kernel are touched: `flash_attn`,
`flash_attn_interface` (and their submodules), `kernels.get_kernel(...)`, `importlib` probes of
`flash_attn`, or torch's CUDA-only `torch.ops.aten._scaled_dot_product_flash_attention` /
`_flash_attention_forward` ops. Code that uses only torch's own SDPA (`hasattr(F,
"scaled_dot_product_attention")`, `SDPBackend.FLASH_ATTENTION`, `sdpa_kernel(...)`, capability
checks choosing SDPA/flex backends) needs nothing: SDPA picks a CPU kernel by itself (nanoGPT,
litgpt, torchtitan; docs/real-repos.md finding 11). The patch adds one module constant, read
from the environment, and checks it first:

* an override hook the code already has (nanochat's `_override_impl = None`, compared with
  `'sdpa'`) is set from it, and nothing parallel is added;
* a function that loads/downloads a kernel and already returns None when unavailable returns
  None at once when forced; a `try: from flash_attn import ...` probe raises ImportError at once;
* an unconditional module-level `from flash_attn import ...` / `import flash_attn` is imported
  only when not forced (forced, `flash_attn_func` is bound to an SDPA stand-in with its (B, T, H, D)
  interface; a module name to a namespace holding that stand-in);
* an `if`/conditional expression/flag assignment whose one branch uses flash-attention is taken
  only when not forced.
Field report: nanochat-cpu-gloo-ddp.md (bug 2, FA chosen from torch.cuda.is_available() on a CPU run).
"""

from __future__ import annotations

import ast
import re

import libcst as cst
import libcst.matchers as m
from libcst.codemod import SkipFile
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import ParentNodeProvider, PositionProvider, QualifiedNameProvider

from distdoctor.patching.base import PatchCommand, PatchInfo
from distdoctor.patching.cstutil import ast_ident, ast_nodes

PATCH = PatchInfo(
    id="sdpa_force",
    cause="flash_attn_on_cpu",
    title="Check <PREFIX>_FORCE_SDPA=1 first wherever the attention implementation is chosen",
    risk="Only acts when the variable is set; then every attention selected by the rewritten checks uses "
         "torch SDPA, and the flash_attn_func stand-in aligns causal masks top-left (flash-attn aligns them "
         "bottom-right when query and key lengths differ) and refuses window/softcap/alibi arguments.",
    env_var="<PREFIX>_FORCE_SDPA",
    prefilter=("flash_attn", "flash_attention", "get_kernel"),  # every kernel import/load has one
)

FLAG = "_DISTDOCTOR_FORCE_SDPA"
STANDIN = "_distdoctor_sdpa_flash_attn_func"
_FLASHY = re.compile(r"flash|(?<![a-z])fa[23](?![0-9])", re.IGNORECASE)
# a condition chooses an attention implementation only if it speaks of one of these
_CHOICE = re.compile(r"flash|(?<![a-z])fa[23](?![0-9])|sdpa|is_available|is_cuda|device|dtype|capability|impl|"
                     r"backend|attn|attention|kernel|available|use_|has_|enable", re.IGNORECASE)
# top-level modules of the flash-attn packages (FA2: flash_attn, flash_attn_2_cuda; FA3: flash_attn_interface, ...)
_KERNEL_MODULE = re.compile(r"^flash_attn(?:_interface|_\d\w*|_cuda|_hopper)?$")
_KERNEL_OPS = {"_scaled_dot_product_flash_attention", "_flash_attention_forward"}  # CUDA-only aten ops
_IMPORT_PROBES = {"import_module", "find_spec", "__import__"}

_STANDIN_SOURCE = f'''def {STANDIN}(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, **unsupported):
    """flash_attn_func's (batch, seqlen, heads, headdim) interface on torch SDPA, used when {{env}}=1."""
    if any(value not in (None, False, 0.0, (-1, -1)) for value in unsupported.values()):
        raise NotImplementedError(f"{{env}}=1: no SDPA stand-in for flash_attn_func arguments {{{{sorted(unsupported)}}}}")
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        dropout_p=dropout_p, is_causal=causal, scale=softmax_scale, enable_gqa=q.size(2) != k.size(2),
    )
    return out.transpose(1, 2)
'''


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


_MESSAGE_CALLS = {"print", "print0", "warn", "warning", "info", "debug", "error", "log", "write"}


class _FlashFinder(cst.CSTVisitor):
    """Looks for flash-attention names and strings, skipping messages (print/log/warn calls)."""

    def __init__(self) -> None:
        self.found = False

    def visit_Call(self, node: cst.Call) -> bool:
        name = node.func.attr.value if isinstance(node.func, cst.Attribute) else getattr(node.func, "value", None)
        return name not in _MESSAGE_CALLS

    def visit_If(self, node: cst.If) -> bool:
        node.body.visit(self)  # a nested condition does not use flash attention, its branches may
        if node.orelse is not None:
            node.orelse.visit(self)
        return False

    def visit_IfExp(self, node: cst.IfExp) -> bool:
        node.body.visit(self)
        node.orelse.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.found |= bool(_FLASHY.search(node.value))

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.found |= bool(_FLASHY.search(node.value))


def mentions_flash(node: cst.CSTNode | None) -> bool:
    """Whether `node` uses flash attention by name or string (flash, fa2, fa3), messages aside."""
    if node is None:
        return False
    finder = _FlashFinder()
    node.visit(finder)
    return finder.found


def mentions_flag(node: cst.CSTNode | None) -> bool:
    return node is not None and bool(m.findall(node, m.Name(FLAG)))


def is_kernel_module(dotted: str) -> bool:
    """`flash_attn`, `flash_attn.flash_attn_interface`, `flash_attn_interface`, ... (absolute names only)."""
    return bool(_KERNEL_MODULE.match(dotted.split(".")[0]))


def _call_name(func: cst.BaseExpression) -> str | None:
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None


def _hf_flash_kernel(call: cst.Call) -> bool:
    """`get_kernel("org/flash-attention-3")`, `kernels.get_kernel(...)` or `get_kernel(name).flash_attn_interface`
    (HF kernels), not any function called get_kernel (torch's inductor has several)."""
    if call.args and isinstance(call.args[0].value, cst.SimpleString) and _FLASHY.search(call.args[0].value.value):
        return True
    if m.matches(call.func, m.Attribute(value=m.Name("kernels"))):
        return True
    return False


def imports_kernel(node: cst.CSTNode) -> bool:
    """Whether `node` imports or loads a flash-attention kernel: an absolute import of a flash-attn module,
    `kernels.get_kernel(...)`, or `importlib.import_module("flash_attn...")`-style probes."""
    for imp in m.findall(node, m.Import() | m.ImportFrom()):
        if isinstance(imp, cst.ImportFrom):
            if imp.relative or imp.module is None:
                continue  # `from .kernels import HAS_FLASH` is the project's own module
            names = [_code(imp.module)]
        else:
            names = [_code(alias.name) for alias in imp.names]
        if any(is_kernel_module(n) for n in names):
            return True
    for attr in m.findall(node, m.Attribute(value=m.Call())):
        if _call_name(attr.value.func) == "get_kernel" and _FLASHY.search(attr.attr.value):
            return True
    for call in m.findall(node, m.Call()):
        name = _call_name(call.func)
        if name == "get_kernel" and _hf_flash_kernel(call):
            return True
        if name in _IMPORT_PROBES and call.args and isinstance(call.args[0].value, cst.SimpleString):
            value = call.args[0].value.evaluated_value
            if isinstance(value, str) and is_kernel_module(value):
                return True
    return False


def loads_kernel(module: cst.Module) -> bool:
    """Whether a file has a flash-attention kernel to force away: imports_kernel, or a CUDA-only flash op
    of torch (`torch.ops.aten._scaled_dot_product_flash_attention`) or of flash-attn (`torch.ops.flash_attn`)."""
    if imports_kernel(module):
        return True
    for attr in m.findall(module, m.Attribute()):
        if attr.attr.value in _KERNEL_OPS:
            return True
        if is_kernel_module(attr.attr.value) and m.matches(attr.value, m.Attribute(attr=m.Name("ops"))):
            return True
    return False


def _ast_selects(tree: ast.Module) -> bool:
    """Whether the Transformer could find a selection to switch in a file that loads no kernel itself: an
    `if`/`... if ... else ...` choosing by a Name or string _CHOICE knows with flash in a branch, a decision
    assigned to a flash-named target, or an override hook (_ast_hook)."""
    for node in ast_nodes(tree, ast.If, ast.IfExp, ast.Assign):
        if isinstance(node, (ast.If, ast.IfExp)):
            leaves = [n.id if isinstance(n, ast.Name) else n.value for n in ast.walk(node.test)
                      if isinstance(n, ast.Name) or (isinstance(n, ast.Constant) and isinstance(n.value, str))]
            branches = node.body if isinstance(node.body, list) else [node.body]
            branches += node.orelse if isinstance(node.orelse, list) else [node.orelse]
            if any(_CHOICE.search(leaf) for leaf in leaves) and _FLASHY.search(
                    "\n".join(ast.unparse(b) for b in branches)):
                return True
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, (ast.Name, ast.Attribute)) and _FLASHY.search(ast.unparse(target)) and \
                    isinstance(node.value, (ast.BoolOp, ast.Compare, ast.UnaryOp, ast.Call)):
                return True
    return _ast_hook(tree)


def _ast_hook(tree: ast.Module) -> bool:
    """Whether visit_Module could find an override hook: a module-level `*override* = None` (or `= FLAG if ...
    else None`) whose name a comparison sets against a string naming sdpa."""
    candidates = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and "override" in stmt.targets[0].id.lower() and (_ast_none(stmt.value) or (
                    isinstance(stmt.value, ast.IfExp) and isinstance(stmt.value.test, ast.Name)
                    and stmt.value.test.id == FLAG and _ast_none(stmt.value.orelse))):
            candidates.add(stmt.targets[0].id)
    if not candidates:
        return False
    for comp in ast_nodes(tree, ast.Compare):
        parts = [comp.left, *comp.comparators]
        if any(isinstance(p, ast.Name) and p.id in candidates for p in parts) and any(
                isinstance(p, ast.Constant) and isinstance(p.value, (str, bytes))
                and (b"sdpa" if isinstance(p.value, bytes) else "sdpa") in p.value.lower() for p in parts):
            return True
    return False


def _ast_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def screen(tree: ast.Module) -> bool:
    """Cheap pre-check on Python's own parse: the same test as loads_kernel(); where only a CUDA-only
    flash op of torch is named (no kernel imported), also a selection the Transformer could switch."""
    names_op = False
    for node in ast_nodes(tree, ast.Import, ast.ImportFrom, ast.Call, ast.Attribute):
        if isinstance(node, ast.Import) and any(is_kernel_module(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and node.module and is_kernel_module(node.module):
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = ast_ident(func)
            if name == "get_kernel" and ((node.args and isinstance(node.args[0], ast.Constant) and isinstance(
                    node.args[0].value, str) and _FLASHY.search(node.args[0].value)) or (
                    isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "kernels")):
                return True
            if name in _IMPORT_PROBES and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str) and is_kernel_module(node.args[0].value):
                return True
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call) and _FLASHY.search(node.attr) and \
                ast_ident(node.value.func) == "get_kernel":
            return True
        if isinstance(node, ast.Attribute) and (node.attr in _KERNEL_OPS or (
                is_kernel_module(node.attr) and isinstance(node.value, ast.Attribute) and node.value.attr == "ops")):
            names_op = True
    return names_op and _ast_selects(tree)


def flag_test(test: cst.BaseExpression, forced_branch_is_body: bool) -> cst.BaseExpression:
    """`FLAG or (test)` when forcing should take the body, `not FLAG and (test)` otherwise."""
    if isinstance(test, (cst.BooleanOperation, cst.IfExp, cst.NamedExpr, cst.Lambda)) and not test.lpar:
        if not (isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And)
                and not forced_branch_is_body):
            test = test.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    space = cst.SimpleWhitespace(" ")
    if forced_branch_is_body:
        return cst.BooleanOperation(cst.Name(FLAG), cst.Or(space, space), test)
    return cst.BooleanOperation(cst.UnaryOperation(cst.Not(space), cst.Name(FLAG)), cst.And(space, space), test)


class Transformer(PatchCommand):
    """Check <PREFIX>_FORCE_SDPA first wherever a flash-attention kernel is chosen or loaded."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ParentNodeProvider)

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self.env = f"{self.options.env_prefix}_FORCE_SDPA"
        self.hook: tuple[str, str] | None = None  # (override variable, the value that selects SDPA)
        self.first_changed_stmt: int | None = None  # index in the module body of the first rewrite
        self.need_standin = False
        self._loader_depth = 0
        self._rewrote = False
        self.switched: set[str] = set()  # flags already False when forced (`HAS_FLASH`, `self.use_flash`)

    # -- survey ------------------------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        if not loads_kernel(node):
            raise SkipFile("no flash-attention kernel imported or loaded")  # torch SDPA only: nothing to force
        candidates = set()
        for stmt in node.body:
            if m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(
                    targets=[m.AssignTarget(m.Name())],
                    value=m.Name("None") | m.IfExp(test=m.Name(FLAG), orelse=m.Name("None")))])):
                name = stmt.body[0].targets[0].target.value
                if "override" in name.lower():
                    candidates.add(name)
        for comp in m.findall(node, m.Comparison()):
            parts = [comp.left] + [c.comparator for c in comp.comparisons]
            names = [p.value for p in parts if isinstance(p, cst.Name) and p.value in candidates]
            strings = [p for p in parts if isinstance(p, cst.SimpleString) and "sdpa" in p.evaluated_value.lower()]
            if names and strings:
                self.hook = (names[0], strings[0].value)
                return

    def _mark(self, node: cst.CSTNode, what: str) -> None:
        self.record(node, what)
        self._rewrote = True
        top = node
        parent = self.get_metadata(ParentNodeProvider, top, None)
        while parent is not None and not isinstance(parent, cst.Module):
            top, parent = parent, self.get_metadata(ParentNodeProvider, parent, None)
        if parent is not None:
            index = next(i for i, s in enumerate(parent.body) if s is top)
            if self.first_changed_stmt is None or index < self.first_changed_stmt:
                self.first_changed_stmt = index

    def _forced_if(self, body: list[cst.BaseStatement]) -> cst.If:
        return cst.If(test=cst.Name(FLAG), body=cst.IndentedBlock(body=body))

    # -- override hook -----------------------------------------------------------------------
    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        if self.hook and m.matches(original_node, m.Assign(targets=[m.AssignTarget(m.Name(self.hook[0]))],
                                                          value=m.Name("None"))):
            parent = self.get_metadata(ParentNodeProvider, self.get_metadata(ParentNodeProvider, original_node))
            if isinstance(parent, cst.Module):
                self._mark(original_node, f"{self.hook[0]} = {self.hook[1]} when {self.env}=1 (existing override hook)")
                return updated_node.with_changes(value=cst.IfExp(
                    test=cst.Name(FLAG), body=cst.SimpleString(self.hook[1]), orelse=cst.Name("None")))
        if (not self.hook and self._loader_depth == 0 and len(original_node.targets) == 1
                and isinstance(original_node.targets[0].target, (cst.Name, cst.Attribute))
                and _FLASHY.search(_code(original_node.targets[0].target))
                and self._is_decision(original_node.value)):
            self.switched.add(_code(original_node.targets[0].target))
            if mentions_flag(original_node.value) or self._implied(original_node.value, False):
                return updated_node  # already False when forced: switched, or `use_flash = HAS_FLASH and ...`
            self._mark(original_node, f"{_code(original_node.targets[0].target)} is False when {self.env}=1")
            return updated_node.with_changes(value=flag_test(updated_node.value, forced_branch_is_body=False))
        return updated_node

    def _is_decision(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, (cst.BooleanOperation, cst.Comparison, cst.UnaryOperation)):
            return True
        if isinstance(value, cst.Call):
            return any(q.name == "torch.cuda.is_available" for q in self.get_metadata(QualifiedNameProvider, value.func, set()))
        return False

    # -- kernel loaders and import probes ----------------------------------------------------
    def _is_loader(self, node: cst.FunctionDef) -> bool:
        returns_none = m.findall(node, m.Return(value=m.Name("None")))
        return bool(returns_none) and imports_kernel(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self._is_loader(node):
            self._loader_depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if not self._is_loader(original_node):
            return updated_node
        self._loader_depth -= 1
        body = list(updated_node.body.body)
        start = 1 if body and m.matches(body[0], m.SimpleStatementLine([m.Expr(m.SimpleString())])) else 0
        if start < len(body) and mentions_flag(body[start]):
            return updated_node
        self._mark(original_node, f"{original_node.name.value}() returns None at once when {self.env}=1")
        guard = self._forced_if([cst.SimpleStatementLine([cst.Return(cst.Name("None"))])])
        body.insert(start, guard)
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))

    def leave_Try(self, original_node: cst.Try, updated_node: cst.Try) -> cst.Try:
        if self._loader_depth or not imports_kernel(original_node.body):
            return updated_node
        caught = []
        for handler in original_node.handlers:
            if isinstance(handler.type, cst.Tuple):
                caught.extend(element.value for element in handler.type.elements)
            else:
                caught.append(handler.type)
        if any(t is None or m.matches(t, m.Name("ImportError") | m.Name("Exception") | m.Name("BaseException"))
               for t in caught):
            exc = "ImportError"
        elif any(m.matches(t, m.Name("ModuleNotFoundError")) for t in caught):
            exc = "ModuleNotFoundError"
        else:
            return updated_node
        for handler in original_node.handlers:  # `HAS_FLASH = False` where the import fails
            for assign in m.findall(handler.body, m.Assign(value=m.Name("False") | m.Name("None"))):
                self.switched.update(_code(t.target) for t in assign.targets)
        suite = updated_node.body
        if isinstance(suite, cst.SimpleStatementSuite):  # `try: from flash_attn import f` on one line
            suite = cst.IndentedBlock([cst.SimpleStatementLine(
                [s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT) for s in suite.body])])
        body = list(suite.body)
        if body and mentions_flag(body[0]):
            return updated_node
        self._mark(original_node, f"flash-attn import probe raises {exc} at once when {self.env}=1")
        message = cst.SimpleString(f'"{self.env}=1: flash-attention not loaded"')
        raise_stmt = cst.SimpleStatementLine([cst.Raise(cst.Call(cst.Name(exc), [cst.Arg(message)]))])
        body.insert(0, self._forced_if([raise_stmt]))
        return updated_node.with_changes(body=suite.with_changes(body=body))

    def leave_SimpleStatementLine(self, original_node, updated_node):
        """An unconditional module-level `from flash_attn import ...` / `import flash_attn`: import it only
        when not forced; forced, bind the same names to the SDPA stand-in (or None)."""
        if len(original_node.body) != 1 or not isinstance(self.get_metadata(ParentNodeProvider, original_node),
                                                          cst.Module):
            return updated_node
        imp = original_node.body[0]
        forced = []
        if isinstance(imp, cst.ImportFrom):
            if imp.relative or imp.module is None or not is_kernel_module(_code(imp.module)) \
                    or isinstance(imp.names, cst.ImportStar):
                return updated_node
            what = _code(imp.module)
            for alias in imp.names:
                bound = _code(alias.asname.name) if alias.asname else _code(alias.name)
                value = cst.Name(STANDIN) if alias.name.value == "flash_attn_func" else cst.Name("None")
                self.need_standin |= alias.name.value == "flash_attn_func"
                forced.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(bound))], value)]))
        elif isinstance(imp, cst.Import):
            aliases = [a for a in imp.names if is_kernel_module(_code(a.name))]
            if not aliases or len(aliases) != len(imp.names):
                return updated_node  # `import flash_attn, other` is left for a person to split
            if any(a.asname is None and "." in _code(a.name) for a in aliases):
                return updated_node  # `import flash_attn.x` binds flash_attn with submodules: no stand-in
            what = ", ".join(_code(a.name) for a in aliases)
            AddImportsVisitor.add_needed_import(self.context, "types")
            self.need_standin = True
            for alias in aliases:
                bound = _code(alias.asname.name) if alias.asname else _code(alias.name)
                value = cst.parse_expression(f"types.SimpleNamespace(flash_attn_func={STANDIN})")
                forced.append(cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(cst.Name(bound))], value)]))
        else:
            return updated_node
        self._mark(original_node, f"{what} is imported only when {self.env} is not 1")
        return cst.If(test=cst.Name(FLAG), body=cst.IndentedBlock(forced),
                      orelse=cst.Else(cst.IndentedBlock([updated_node.with_changes(leading_lines=[])])),
                      leading_lines=updated_node.leading_lines)

    # -- selections ---------------------------------------------------------------------------
    def _implied(self, test: cst.BaseExpression, forced_value: bool) -> bool:
        """Whether `test` already evaluates to forced_value when forced, through a switched flag."""
        if isinstance(test, (cst.Name, cst.Attribute)):
            return not forced_value and _code(test) in self.switched
        if m.matches(test, m.UnaryOperation(operator=m.Not())):
            return self._implied(test.expression, not forced_value)
        if isinstance(test, cst.BooleanOperation):
            # False: one false conjunct of an `and` suffices; True: one true disjunct of an `or`
            if isinstance(test.operator, cst.And) != forced_value:
                return self._implied(test.left, forced_value) or self._implied(test.right, forced_value)
        return False

    def _selection_side(self, test: cst.BaseExpression, body: cst.CSTNode,
                        orelse: cst.CSTNode | None) -> bool | None:
        """False: forcing must avoid the body (it uses flash); True: forcing must take it; None: not a selection."""
        if self.hook or self._loader_depth:
            return None
        if not any(_CHOICE.search(leaf.value) for leaf in m.findall(test, m.Name() | m.SimpleString())):
            return None  # e.g. `if op in table:` dispatch, not a choice of attention implementation
        in_body, in_else = mentions_flash(body), mentions_flash(orelse)
        side = None
        if in_body and not in_else:
            side = False
        elif in_else and not in_body and orelse is not None:
            side = True
        if side is not None and self._implied(test, side):
            return None  # a switched flag already decides it
        return side

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        if mentions_flag(original_node.test) or m.findall(original_node.test, m.Name("__name__")):
            return updated_node  # already switched, or the script entry point
        parent = self.get_metadata(ParentNodeProvider, original_node, None)
        if isinstance(parent, cst.If) and parent.orelse is original_node:
            return updated_node  # an elif: the chain's first test carries the switch
        orelse = original_node.orelse.body if isinstance(original_node.orelse, cst.Else) else original_node.orelse
        side = self._selection_side(original_node.test, original_node.body, orelse)
        if side is None:
            return updated_node
        self._mark(original_node, f"`if {_code(original_node.test)}` checks {self.env} first")
        return updated_node.with_changes(test=flag_test(updated_node.test, side))

    def leave_IfExp(self, original_node: cst.IfExp, updated_node: cst.IfExp) -> cst.IfExp:
        if mentions_flag(original_node.test) or m.matches(original_node.test, m.Name(FLAG)):
            return updated_node
        side = self._selection_side(original_node.test, original_node.body, original_node.orelse)
        if side is None:
            return updated_node
        self._mark(original_node, f"`... if {_code(original_node.test)} else ...` checks {self.env} first")
        return updated_node.with_changes(test=flag_test(updated_node.test, side))

    # -- the switch itself ---------------------------------------------------------------------
    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self._rewrote:
            return updated_node
        body = list(updated_node.body)
        for i, stmt in enumerate(body):  # blank lines around `if FLAG: ... else: import flash_attn`
            if not m.matches(stmt, m.If(test=m.Name(FLAG), orelse=m.Else())):
                continue
            for j in (i, i + 1) if i else (i + 1,):
                if j < len(body) and not any(line.comment is None for line in body[j].leading_lines[:1]):
                    body[j] = body[j].with_changes(leading_lines=[cst.EmptyLine(), *body[j].leading_lines])
        defined = {_code(t.target) for s in body if isinstance(s, cst.SimpleStatementLine)
                   for a in s.body if isinstance(a, cst.Assign) for t in a.targets}
        defined |= {s.name.value for s in body if isinstance(s, cst.FunctionDef)}
        config = updated_node.config_for_parsing
        new = []
        if FLAG not in defined:
            AddImportsVisitor.add_needed_import(self.context, "os")
            new.append(cst.parse_statement(
                f'{FLAG} = os.environ.get("{self.env}", "").lower() in ("1", "true", "yes")'
                f"  # distdoctor: {self.env}=1 selects torch SDPA\n", config=config))
        if self.need_standin and STANDIN not in defined:
            if not any(m.matches(s, m.SimpleStatementLine([m.Import([m.ImportAlias(m.Name("torch"), asname=None)])]))
                       for s in body):  # torch is read when the stand-in runs: a later `import torch` is in time
                AddImportsVisitor.add_needed_import(self.context, "torch")
            new.append(cst.parse_statement(_STANDIN_SOURCE.format(env=self.env), config=config))
        if not new:
            return updated_node
        index = 0
        for i, stmt in enumerate(body):
            if i == self.first_changed_stmt:
                break
            if isinstance(stmt, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) or (i == 0 and m.matches(s, m.Expr(m.SimpleString())))
                for s in stmt.body
            ):
                index = i + 1
            else:
                break
        for j, stmt in enumerate(new):
            gap = 2 if isinstance(stmt, cst.FunctionDef) else 1
            new[j] = stmt.with_changes(leading_lines=[cst.EmptyLine()] * gap if index or j else [])
        if index < len(body):
            nxt = body[index]
            lines = list(nxt.leading_lines)
            have = next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))
            want = 2 if isinstance(nxt, (cst.FunctionDef, cst.ClassDef)) or isinstance(new[-1], cst.FunctionDef) else 1
            if have < want:
                body[index] = nxt.with_changes(leading_lines=[cst.EmptyLine()] * (want - have) + lines)
        body[index:index] = new
        return updated_node.with_changes(body=body)


VALID = [
    # SDPA only: nothing to force
    "import torch.nn.functional as F\n\n\ndef attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
    # device selection that is not about attention is left alone
    "import torch\n\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
]

INVALID = [
    (
        "import torch\n"
        "\n"
        "try:\n"
        "    from flash_attn import flash_attn_func\n"
        "    HAS_FLASH = True\n"
        "except ImportError:\n"
        "    HAS_FLASH = False\n"
        "\n"
        "\n"
        "def attend(q, k, v):\n"
        "    if HAS_FLASH and torch.cuda.is_available():  # HAS_FLASH is False when forced: unchanged\n"
        "        return flash_attn_func(q, k, v, causal=True)\n"
        "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
        "import torch\n"
        "import os\n"
        "\n"
        '_DISTDOCTOR_FORCE_SDPA = os.environ.get("DISTDOCTOR_FORCE_SDPA", "").lower() in ("1", "true", "yes")'
        "  # distdoctor: DISTDOCTOR_FORCE_SDPA=1 selects torch SDPA\n"
        "\n"
        "try:\n"
        "    if _DISTDOCTOR_FORCE_SDPA:\n"
        '        raise ImportError("DISTDOCTOR_FORCE_SDPA=1: flash-attention not loaded")\n'
        "    from flash_attn import flash_attn_func\n"
        "    HAS_FLASH = True\n"
        "except ImportError:\n"
        "    HAS_FLASH = False\n"
        "\n"
        "\n"
        "def attend(q, k, v):\n"
        "    if HAS_FLASH and torch.cuda.is_available():  # HAS_FLASH is False when forced: unchanged\n"
        "        return flash_attn_func(q, k, v, causal=True)\n"
        "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
    ),
]
