"""Turn hard CUDA requirements (asserts, exits, `% device_count()`) into branches that let a CPU run go on.

Kept as they are where the same function then starts one worker per GPU (`mp.spawn(nprocs=device_count())`):
there a CPU run would start no worker and exit 0, so the loud stop is the better outcome."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import ParentNodeProvider, ScopeProvider

from distdoctor.patching.base import PatchCommand, PatchInfo
from distdoctor.patching.cstutil import (
    ancestors, ast_ident, ast_nodes, get_arg, literal_text, lookup, named_nodes, parenthesize, qualified_names,
    walk,
)

PATCH = PatchInfo(
    id="cuda_requirements",
    cause="nccl_without_cuda",
    title="CUDA-only asserts, exits, `rank % torch.cuda.device_count()` and a module-level `device = \"cuda\"` "
          "default before a process group become CPU branches (warn and go on)",
    risk="A job that must not run without GPUs now runs on the CPU after a warning instead of stopping; checks "
         "inside an explicit `device == \"cuda\"` branch are kept. A check for a minimum number of GPUs (2, "
         "`min_gpus`, a *gpu* helper) still stops a machine that has GPUs, only too few: the warning is taken "
         "only when no GPU is there. A config default `device = \"cuda\"` becomes \"cpu\" only when no GPU is "
         "available (an explicit --device still wins).",
    env_var=None,
    prefilter=("is_available", "device_count", "gpu", "init_process_group"),
)

AVAILABLE = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
COUNT = frozenset({"torch.cuda.device_count", "torch.accelerator.device_count"})
SPAWN = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                   "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes"})
EXITS = frozenset({"sys.exit", "builtins.exit", "builtins.quit", "os._exit", "exit", "quit"})
ENTRY_WORDS = ("main", "train", "setup", "init", "run", "launch", "worker", "spawn")
ENTRY_PREFIXES = ("train", "setup", "init", "launch")  # training_loop, initialize; not runtime
# a name that holds a number of GPUs (n_gpus, num_gpus, gpu_count, world_gpus), not gpu_flops or gpu_id
GPU_COUNT_NAME = re.compile(r"(^|_)(n|num|number_of|total|min|max|required|needed|available|visible|world)?_?gpus$"
                            r"|(^|_)gpus?_?(count|num|number|available|needed|required)$|^ngpus?$", re.IGNORECASE)


def is_entry_name(name: str) -> bool:
    """A function name that says it starts the run: main, train_model, setup_ddp, run, launch_workers."""
    if name.startswith("__"):
        return False
    for token in name.lower().strip("_").split("_"):
        if token in ENTRY_WORDS or token.rstrip("s") in ENTRY_WORDS or token.startswith(ENTRY_PREFIXES):
            return True
    return False
DEFAULT_MESSAGE = "no CUDA GPU available: continuing on the CPU"


def _is_threshold(node: cst.CSTNode) -> bool:
    """A minimum number of GPUs (`2`, `min_gpus`, `required_gpus`), not a device index."""
    if isinstance(node, cst.Integer):
        return True
    return isinstance(node, cst.Name) and any(k in node.value.lower() for k in ("min", "need", "requir", "gpu"))


# `count OP n` read with the count on the left: true on any machine with a GPU, or only on one without
_MIRROR = {cst.LessThan: cst.GreaterThan, cst.GreaterThan: cst.LessThan,
           cst.LessThanEqual: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThanEqual}
_ANY_GPU = {(cst.GreaterThan, 0), (cst.GreaterThanEqual, 1), (cst.NotEqual, 0)}
_NO_GPU = {(cst.LessThan, 1), (cst.LessThanEqual, 0), (cst.Equal, 0)}


def _is_skip(exc: cst.BaseExpression | None) -> bool:
    """`raise unittest.SkipTest(...)` and other skip exceptions."""
    target = exc.func if isinstance(exc, cst.Call) else exc
    while isinstance(target, cst.Attribute):
        if "skip" in target.attr.value.lower():
            return True
        target = target.value
    return isinstance(target, cst.Name) and "skip" in target.value.lower()


class _Screen:
    """The Transformer's rules on Python's own parse, without name resolution: `torch.cuda`/`torch.accelerator`
    are recognised by their attribute chain or an import alias (over-approximating, never missing a rewrite)."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree, self._count_names = tree, None
        self.receivers = {"cuda", "accelerator"}
        self.direct: set[str] = set()  # from torch.cuda import is_available [as x]
        for node in ast_nodes(tree, ast.Import, ast.ImportFrom):
            if isinstance(node, ast.Import):
                self.receivers |= {a.asname for a in node.names if a.asname and a.name in ("torch.cuda", "torch.accelerator")}
            elif isinstance(node, ast.ImportFrom) and node.module in ("torch", "torch.cuda", "torch.accelerator"):
                for a in node.names:
                    if node.module == "torch" and a.name in ("cuda", "accelerator"):
                        self.receivers.add(a.asname or a.name)
                    elif node.module != "torch" and a.name in ("is_available", "device_count"):
                        self.direct.add(a.asname or a.name)

    def gpu_call(self, node: ast.AST, kinds: tuple[str, ...], gpu_names: bool = True) -> bool:
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        name = ast_ident(func) or ""
        if gpu_names and "gpu" in name.lower():
            return True
        if isinstance(func, ast.Name):
            return name in self.direct
        if name not in kinds:
            return False
        return ast_ident(func.value) in self.receivers

    def counts(self, node: ast.AST) -> bool:
        return self.gpu_call(node, ("device_count",)) or (isinstance(node, ast.Name) and bool(GPU_COUNT_NAME.search(node.id)))

    def needs_gpu(self, test: ast.AST) -> bool:
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self.needs_gpu(v) for v in test.values)
        if self.gpu_call(test, ("is_available", "device_count")):
            return True
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op = test.ops[0]
            return (isinstance(op, (ast.Gt, ast.GtE)) and self.counts(test.left)) or \
                (isinstance(op, (ast.Lt, ast.LtE)) and self.counts(test.comparators[0]))
        return False

    def no_gpu(self, test: ast.AST) -> bool:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.needs_gpu(test.operand)
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            return any(self.no_gpu(v) for v in test.values)
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            op, right = test.ops[0], test.comparators[0]
            return (isinstance(op, (ast.Lt, ast.LtE, ast.Eq)) and self.counts(test.left) and _ast_threshold(right)) or \
                (isinstance(op, (ast.Gt, ast.GtE)) and self.counts(right) and _ast_threshold(test.left))
        return False

    def modulo(self, node: ast.AST) -> bool:
        return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.FloorDiv)) and (
            self.gpu_call(node.right, ("device_count",), gpu_names=False)
            or (isinstance(node.right, ast.Name) and node.right.id in self.count_names()))

    def count_names(self) -> set[str]:
        """Names some assignment gives torch.cuda.device_count() (alone or at its place in a tuple)."""
        if self._count_names is None:
            self._count_names = set()
            for a in ast_nodes(self.tree, ast.Assign):
                pairs = [(a.targets[0], a.value)] if len(a.targets) == 1 else []
                if pairs and isinstance(a.value, ast.Tuple) and isinstance(a.targets[0], ast.Tuple) \
                        and len(a.value.elts) == len(a.targets[0].elts):
                    pairs = list(zip(a.targets[0].elts, a.value.elts))
                self._count_names |= {t.id for t, v in pairs if isinstance(t, ast.Name)
                                      and self.gpu_call(v, ("device_count",), gpu_names=False)}
        return self._count_names


def _at_least_one(count: cst.BaseExpression) -> cst.Call:
    """`max(count, 1)`: a GPU count as a divisor that is never 0 on a CPU."""
    return cst.Call(func=cst.Name("max"), args=[
        cst.Arg(value=count, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
        cst.Arg(value=cst.Integer("1"))])


def _ast_threshold(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return True
    return isinstance(node, ast.Name) and any(k in node.id.lower() for k in ("min", "need", "requir", "gpu"))


def _ast_entry(func: str | None) -> bool:
    """Transformer._in_entry_point: module level or a function named like the start of a run."""
    if func is None:
        return True
    return bool(func) and is_entry_name(func)


def _ast_exits(stmt: ast.stmt, func: str | None) -> bool:
    if isinstance(stmt, ast.Raise):
        return _ast_entry(func) and ("skip" not in ast.dump(stmt.exc).lower() if stmt.exc is not None else True)
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and (
        getattr(stmt.value.func, "id", None) in ("exit", "quit") or getattr(stmt.value.func, "attr", None) in ("exit", "_exit"))


def _ast_function(tree: ast.Module, node: ast.stmt) -> str | None:
    """The name of the innermost function around node, "" when that is a class body, None at module level
    (the scope Transformer._in_entry_point judges), from the definitions' source spans."""
    inner = None
    for d in ast_nodes(tree, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        if (d.lineno, d.col_offset) <= (node.lineno, node.col_offset) \
                and (node.end_lineno, node.end_col_offset) <= (d.end_lineno, d.end_col_offset) \
                and (inner is None or (d.lineno, d.col_offset) > (inner.lineno, inner.col_offset)):
            inner = d
    return None if inner is None else "" if isinstance(inner, ast.ClassDef) else inner.name


def _ast_cuda_default(stmt: ast.stmt) -> bool:
    """A module-level `device = "cuda"` (or "cuda:0") config default."""
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
        and "device" in stmt.targets[0].id.lower() and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str) and stmt.value.value.startswith("cuda")


def _ast_starts_group(tree: ast.Module) -> bool:
    return any(ast_ident(n.func) == "init_process_group" for n in ast_nodes(tree, ast.Call))


def screen(tree: ast.Module) -> bool:
    """Cheap pre-check on Python's own parse: an assert or exiting `if` on GPUs, `% device_count()`, or a
    module-level `device = "cuda"` default in a module that starts a process group."""
    if any(_ast_cuda_default(s) for s in tree.body) and _ast_starts_group(tree):
        return True
    check = _Screen(tree)
    if any(check.needs_gpu(node.test) for node in ast_nodes(tree, ast.Assert)):
        return True
    if any(check.modulo(node) for node in ast_nodes(tree, ast.BinOp)):
        return True
    return any(check.no_gpu(node.test) and any(_ast_exits(st, _ast_function(tree, node)) for st in node.body)
               for node in ast_nodes(tree, ast.If))


class Transformer(PatchCommand):
    """Replace `assert cuda`, `if no gpu: exit/raise` and `x % torch.cuda.device_count()` with CPU-safe code."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (ParentNodeProvider,)  # the rest resolved on demand

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self.lines: dict[int, cst.BaseStatement] = {}  # original statement line -> replacement
        self.exprs: dict[int, cst.BaseExpression] = {}
        self.needs_warnings = False
        self.needs_torch = False

    # ---- what counts as a GPU check ----
    def _is_gpu_call(self, node: cst.CSTNode, names: frozenset[str]) -> bool:
        if not isinstance(node, cst.Call):
            return False
        if qualified_names(self, node.func) & names:
            return True
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "")
        return isinstance(name, str) and ("gpu" in name.lower())

    def _needs_gpu(self, test: cst.BaseExpression) -> bool:
        """test is true only with a GPU: cuda available, enough devices, a *gpu* helper."""
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            return self._needs_gpu(test.left) or self._needs_gpu(test.right)
        if self._is_gpu_call(test, AVAILABLE | COUNT):
            return True
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            op = test.comparisons[0].operator
            if isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual)) and self._counts_gpus(test.left):
                return True
            if isinstance(op, (cst.LessThan, cst.LessThanEqual)) and self._counts_gpus(test.comparisons[0].comparator):
                return True
        return False

    def _no_gpu(self, test: cst.BaseExpression) -> bool:
        """test is true when there is no (or not enough) GPU."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._needs_gpu(test.expression)
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            return self._no_gpu(test.left) or self._no_gpu(test.right)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if isinstance(target.operator, (cst.LessThan, cst.LessThanEqual, cst.Equal)) and \
                    self._counts_gpus(test.left) and _is_threshold(target.comparator):
                return True
            if isinstance(target.operator, (cst.GreaterThan, cst.GreaterThanEqual)) and \
                    self._counts_gpus(target.comparator) and _is_threshold(test.left):
                return True
        return False

    def _any_gpu(self, test: cst.BaseExpression) -> bool:
        """test asks for a GPU at all, not for a minimum number (`is_available()`, `device_count() > 0`,
        `n_gpus >= 1`): on a machine with a GPU it holds, so warning in its place changes nothing there."""
        if isinstance(test, cst.Call) and qualified_names(self, test.func) & (AVAILABLE | COUNT):
            return True
        return self._count_vs_number(test) in _ANY_GPU

    def _no_gpu_at_all(self, test: cst.BaseExpression) -> bool:
        """test holds only where there is no GPU (`not is_available()`, `device_count() < 1`, `n_gpus == 0`)."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            return self._any_gpu(test.expression)
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
            return self._no_gpu_at_all(test.left) and self._no_gpu_at_all(test.right)
        return self._count_vs_number(test) in _NO_GPU

    def _count_vs_number(self, test: cst.BaseExpression) -> tuple[type, int] | None:
        """(operator type, n) of `gpu_count OP n` or `n OP gpu_count` (<, <=, >, >= mirrored), n an integer."""
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            return None
        op, right = test.comparisons[0].operator, test.comparisons[0].comparator
        if isinstance(right, cst.Integer) and self._counts_gpus(test.left):
            return type(op), right.evaluated_value
        if isinstance(test.left, cst.Integer) and type(op) in _MIRROR and self._counts_gpus(right):
            return _MIRROR[type(op)], test.left.evaluated_value
        return None

    def _under_available(self, node: cst.CSTNode) -> bool:
        """node is in the body of `if torch.cuda.is_available():` (this patch's own guard, or the user's)."""
        child = node
        for parent in ancestors(self, node):
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(parent, cst.If) and child is parent.body and self._any_gpu(parent.test) \
                    and self._is_gpu_call(parent.test, AVAILABLE):
                return True
            child = parent
        return False

    def _only_without_gpu(self, kept: cst.BaseStatement, warning: cst.SimpleStatementLine,
                          leading: Sequence[cst.EmptyLine]) -> cst.If:
        """`if torch.cuda.is_available(): <kept> else: <warning>`: a machine with GPUs behaves as before."""
        self.needs_torch = True
        return cst.If(test=cst.parse_expression("torch.cuda.is_available()"),
                      body=cst.IndentedBlock(body=[kept.with_changes(leading_lines=[])]),
                      orelse=cst.Else(body=cst.IndentedBlock(body=[warning])), leading_lines=leading)

    def _counts_gpus(self, node: cst.CSTNode) -> bool:
        if self._is_gpu_call(node, COUNT):
            return True
        return isinstance(node, cst.Name) and bool(GPU_COUNT_NAME.search(node.value))

    def _in_cuda_branch(self, node: cst.CSTNode) -> bool:
        """node sits in a branch the user keyed on CUDA explicitly (`if device == "cuda":`)."""
        for parent in ancestors(self, node):
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(parent, cst.If) and any(
                    (literal_text(s) or "").lower().startswith("cuda") for s in walk(parent.test)
                    if isinstance(s, (cst.SimpleString, cst.FormattedString))):
                return True
        return False

    def _in_entry_point(self, node: cst.CSTNode) -> bool:
        """Module level, `if __name__ == "__main__":`, or a function whose name says it starts the run
        (main, train, setup, init, run, launch, worker): where a raise stops the job, not a library call."""
        for parent in ancestors(self, node):
            if isinstance(parent, cst.FunctionDef):
                name = parent.name.value.lower()
                return is_entry_name(name)
            if isinstance(parent, cst.ClassDef):
                return False
        return True

    def _spawns_per_gpu(self, node: cst.CSTNode) -> bool:
        """The function (or module) around node starts one worker per GPU (`mp.spawn(run, nprocs=n)` with
        `n = torch.cuda.device_count()`): without a GPU that starts none and exits 0, so the requirement's loud
        stop is the better outcome and is kept (VITS train.py, 2026-11-27 section)."""
        scope = next((p for p in ancestors(self, node) if isinstance(p, cst.FunctionDef)), None)
        counts = {a.targets[0].target.value for a in walk(scope or self._module) if isinstance(a, cst.Assign)
                  and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name)
                  and self._is_gpu_call(a.value, COUNT)}
        for call in walk(scope or self._module):
            if not (isinstance(call, cst.Call) and qualified_names(self, call.func) & SPAWN):
                continue
            nprocs = get_arg(call, "nprocs", 2)
            if nprocs is not None and (self._is_gpu_call(nprocs.value, COUNT) or isinstance(nprocs.value, cst.Name)
                                       and nprocs.value.value in counts):
                return True
        return False

    # ---- planning ----
    def _warn(self, message: cst.BaseExpression | None) -> cst.SimpleStatementLine:
        self.needs_warnings = True
        msg = message if message is not None else cst.SimpleString(f'"{DEFAULT_MESSAGE}"')
        call = cst.Call(func=cst.parse_expression("warnings.warn"), args=[cst.Arg(value=msg)])
        return cst.SimpleStatementLine(body=[cst.Expr(value=call)])

    def visit_Module(self, node: cst.Module) -> bool:
        """Find candidates from the qualified-name table (torch.cuda.*, names with "gpu"), then plan."""
        self._module = node
        def gpuish(names: set[str]) -> bool:
            return bool(names & (AVAILABLE | COUNT)) or any("gpu" in n.rsplit(".", 1)[-1].lower() for n in names)

        seen: set[int] = set()
        wanted = {n.rsplit(".", 1)[-1] for n in AVAILABLE | COUNT}
        for found, _ in named_nodes(self, gpuish, lambda ident: ident in wanted or "gpu" in ident.lower()):
            child: cst.CSTNode = found
            for parent in ancestors(self, found):
                if id(parent) in seen:
                    break
                if isinstance(parent, cst.BinaryOperation) and parent.right is child:
                    seen.add(id(parent))
                    self._plan_modulo(parent)
                elif isinstance(parent, cst.Assert) and parent.test is child:
                    line = self.get_metadata(ParentNodeProvider, parent)
                    seen.add(id(parent))
                    self._plan_assert(line)
                    break
                elif isinstance(parent, cst.If) and parent.test is child:
                    seen.add(id(parent))
                    self._plan_if(parent)
                    break
                elif isinstance(parent, cst.Assign):
                    self._plan_count_name(parent, child, self.get_metadata(ParentNodeProvider, found, None))
                    break
                elif isinstance(parent, (cst.BaseStatement, cst.BaseSmallStatement)):
                    break
                child = parent
        self._plan_device_default(node)
        return bool(self.lines or self.exprs)  # nothing to rewrite: skip the traversal

    def _plan_device_default(self, module: cst.Module) -> None:
        """nanoGPT's `device = 'cuda'` config default: on a machine without CUDA the run would still ask for
        NCCL and CUDA devices; fall back to "cpu" there (a `--device=...` override still wins)."""
        starts_group = any(isinstance(n, cst.Call) and m.matches(
            n.func, m.Name("init_process_group") | m.Attribute(attr=m.Name("init_process_group"))) for n in walk(module))
        if not starts_group:
            return
        for stmt in module.body:
            if not m.matches(stmt, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())],
                                                                         value=m.SimpleString())])):
                continue
            assign = stmt.body[0]
            text = literal_text(assign.value) or ""
            if "device" not in assign.targets[0].target.value.lower() or not text.startswith("cuda"):
                continue
            quote = assign.value.quote
            value = cst.IfExp(test=cst.parse_expression("torch.cuda.is_available()"), body=assign.value,
                              orelse=cst.SimpleString(f"{quote}cpu{quote}"))
            self.lines[id(stmt)] = stmt.with_changes(body=[assign.with_changes(value=value)])
            self.needs_torch = True
            self.record(stmt, f"config default {text!r} -> 'cpu' when torch.cuda.is_available() is False")

    def _plan_assert(self, node: cst.CSTNode) -> None:
        if not isinstance(node, cst.SimpleStatementLine) or len(node.body) != 1 or self._in_cuda_branch(node):
            return
        small = node.body[0]
        if isinstance(small, cst.Assert) and self._needs_gpu(small.test) and not self._under_available(node) \
                and not self._spawns_per_gpu(node):
            if not self._any_gpu(small.test):  # a minimum count: kept where there are GPUs
                self.lines[id(node)] = self._only_without_gpu(node, self._warn(small.msg), node.leading_lines)
                self.record(node, "assert on a GPU count -> kept where CUDA is available, else a warning and "
                                  "the run goes on on the CPU")
                return
            inner = small.test
            if isinstance(inner, cst.Comparison) and not inner.lpar:
                inner = inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            test = cst.UnaryOperation(operator=cst.Not(), expression=parenthesize(inner))
            self.lines[id(node)] = cst.If(test=test, body=cst.IndentedBlock(body=[self._warn(small.msg)]),
                                          leading_lines=node.leading_lines)
            self.record(node, "assert on CUDA -> warning, the run goes on on the CPU")

    def _plan_if(self, node: cst.If) -> None:
        if not self._no_gpu(node.test) or not isinstance(node.body, cst.IndentedBlock) or self._in_cuda_branch(node) \
                or self._spawns_per_gpu(node):
            return
        for stmt in node.body.body:
            if not m.matches(stmt, m.SimpleStatementLine(body=[m.OneOf(m.Raise(), m.Expr(value=m.Call()))])):
                continue
            small = stmt.body[0]
            if isinstance(small, cst.Raise):
                exc = small.exc
                if _is_skip(exc) or not self._in_entry_point(node):
                    continue  # a test skipping itself, or a library guard: right as they are
                message = exc.args[0].value if isinstance(exc, cst.Call) and exc.args else None
            elif qualified_names(self, small.value.func) & EXITS or m.matches(
                    small.value.func, m.Name("exit") | m.Name("quit")):
                args = small.value.args
                message = args[0].value if args and literal_text(args[0].value) is not None else None
            else:
                continue
            if self._no_gpu_at_all(node.test):
                self.lines[id(stmt)] = self._warn(message).with_changes(leading_lines=stmt.leading_lines)
                self.record(stmt, "exit when no GPU -> warning, the run goes on on the CPU")
            else:  # too few GPUs: a machine with GPUs still stops
                self.lines[id(stmt)] = self._only_without_gpu(stmt, self._warn(message), stmt.leading_lines)
                self.record(stmt, "exit on too few GPUs -> kept where CUDA is available, else a warning and the "
                                  "run goes on on the CPU")

    def _plan_modulo(self, node: cst.BinaryOperation) -> None:
        """`x % device_count()` or `x // device_count()` (a rank's GPU, a per-GPU batch): at least 1 on a CPU."""
        if isinstance(node.operator, (cst.Modulo, cst.FloorDivide)) and self._is_gpu_call(node.right, COUNT) and \
                qualified_names(self, node.right.func) & COUNT:
            self.exprs[id(node.right)] = _at_least_one(node.right)
            op = "%" if isinstance(node.operator, cst.Modulo) else "//"
            self.record(node, f"x {op} device_count() -> x {op} max(device_count(), 1) (no ZeroDivisionError on CPU)")

    def _plan_count_name(self, assign: cst.Assign, value: cst.CSTNode, call: cst.CSTNode) -> None:
        """`n = torch.cuda.device_count()` (or `rank, n = ..., torch.cuda.device_count()`), then `x % n` or
        `x // n`: `x % max(n, 1)` where every assignment of n is such a count."""
        if value is not assign.value or len(assign.targets) != 1 or not isinstance(call, cst.Call) \
                or not qualified_names(self, call.func) & COUNT:
            return
        target = assign.targets[0].target
        if call is not value:  # a tuple element: the target at the same position
            if not (isinstance(value, cst.Tuple) and isinstance(target, cst.Tuple)
                    and len(value.elements) == len(target.elements)):
                return
            index = next((i for i, e in enumerate(value.elements) if e.value is call), None)
            target = target.elements[index].value if index is not None else None
        if not isinstance(target, cst.Name):
            return
        scope = lookup(self, ScopeProvider, target)
        if scope is None:
            return
        assignments = list(scope.assignments[target.value])
        if not assignments or any(a.node is not target and not self._count_target(a.node) for a in assignments):
            return
        for assignment in assignments:
            for ref in assignment.references:
                parent = self.get_metadata(ParentNodeProvider, ref.node, None)
                if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, (cst.Modulo, cst.FloorDivide)) \
                        and parent.right is ref.node and id(ref.node) not in self.exprs:
                    self.exprs[id(ref.node)] = _at_least_one(ref.node)
                    op = "%" if isinstance(parent.operator, cst.Modulo) else "//"
                    self.record(parent, f"x {op} {target.value} (= device_count()) -> x {op} max({target.value}, 1) "
                                        "(no ZeroDivisionError on CPU)")

    def _count_target(self, node: cst.CSTNode) -> bool:
        """node is a Name assigned torch.cuda.device_count() (directly or at its place in a tuple)."""
        parent = self.get_metadata(ParentNodeProvider, node, None)
        element = None
        if isinstance(parent, cst.Element):
            element, parent = parent, self.get_metadata(ParentNodeProvider, parent, None)
            if not isinstance(parent, cst.Tuple):
                return False
            tup, parent = parent, self.get_metadata(ParentNodeProvider, parent, None)
        if not isinstance(parent, cst.AssignTarget):
            return False
        assign = self.get_metadata(ParentNodeProvider, parent, None)
        value = assign.value if isinstance(assign, cst.Assign) else None
        if element is not None:
            if not isinstance(value, cst.Tuple) or len(value.elements) != len(tup.elements):
                return False
            value = value.elements[list(tup.elements).index(element)].value
        return isinstance(value, cst.Call) and bool(qualified_names(self, value.func) & COUNT)

    # ---- rewriting ----
    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self.exprs.get(id(original_node), updated_node)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return self.lines.get(id(original_node), updated_node)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        return self.exprs.get(id(original_node), updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self.needs_warnings and self.lines:
            AddImportsVisitor.add_needed_import(self.context, "warnings")
        if self.needs_torch:
            AddImportsVisitor.add_needed_import(self.context, "torch")
        return updated_node


VALID = [
    # the user asked for CUDA explicitly: the check stays
    'import torch\nif device_type == "cuda":\n    assert torch.cuda.is_available(), "asked for cuda"\n',
    # a check that does not stop the run
    'import torch\nif not torch.cuda.is_available():\n    print("running on CPU")\n',
    'import torch\nlocal = rank % max(torch.cuda.device_count(), 1)\n',
    # not about GPUs
    'assert x > 0\nif not ok:\n    raise SystemExit(1)\n',
    # a GPU property, not a GPU count; and "runtime" is not "run"
    'def estimate_runtime(gpu_flops):\n    if gpu_flops <= 0:\n        raise ValueError("bad flops")\n',
    # a device default in a module that starts no process group
    "device = 'cuda'\nmodel.to(device)\n",
    # a test that skips itself without CUDA
    'import unittest\nimport torch\nif not torch.cuda.is_available():\n    raise unittest.SkipTest("CUDA is unavailable")\n',
]

INVALID = [
    (   # too few GPUs stops a machine that has GPUs, as before; only a machine without any goes on
        'import torch\n\nif torch.cuda.device_count() < 2:\n    raise SystemExit("needs 2 GPUs")\n'
        'if torch.cuda.device_count() == 0:\n    raise SystemExit("no GPU")\n',
        'import torch\nimport warnings\n\nif torch.cuda.device_count() < 2:\n    if torch.cuda.is_available():\n'
        '        raise SystemExit("needs 2 GPUs")\n    else:\n        warnings.warn("needs 2 GPUs")\n'
        'if torch.cuda.device_count() == 0:\n    warnings.warn("no GPU")\n',
    ),
    (
        'import torch\nassert torch.cuda.is_available(), "DDP needs CUDA"\n',
        'import torch\nimport warnings\n\nif not torch.cuda.is_available():\n    warnings.warn("DDP needs CUDA")\n',
    ),
    (   # DDP tutorial: a minimum GPU count check that exits
        'import sys\nimport torch\n\nif __name__ == "__main__":\n    if not verify_min_gpu_count(min_gpus=2):\n'
        '        print("need 2 GPUs")\n        sys.exit()\n    main()\n',
        'import sys\nimport torch\nimport warnings\n\nif __name__ == "__main__":\n'
        '    if not verify_min_gpu_count(min_gpus=2):\n        print("need 2 GPUs")\n'
        '        if torch.cuda.is_available():\n            sys.exit()\n        else:\n'
        '            warnings.warn("no CUDA GPU available: continuing on the CPU")\n    main()\n',
    ),
    (
        'import torch\nn_gpus = torch.cuda.device_count()\nassert n_gpus >= 2, f"needs 2 GPUs, got {n_gpus}"\n'
        'if torch.cuda.device_count() < 1:\n    raise RuntimeError("no GPU")\n',
        'import torch\nimport warnings\n\nn_gpus = torch.cuda.device_count()\nif torch.cuda.is_available():\n'
        '    assert n_gpus >= 2, f"needs 2 GPUs, got {n_gpus}"\nelse:\n'
        '    warnings.warn(f"needs 2 GPUs, got {n_gpus}")\nif torch.cuda.device_count() < 1:\n'
        '    warnings.warn("no GPU")\n',
    ),
    (
        'import torch\ndevice_id = rank % torch.cuda.device_count()\n',
        'import torch\ndevice_id = rank % max(torch.cuda.device_count(), 1)\n',
    ),
    (   # nanoGPT's config default, in the script that starts the process group
        "import torch\nfrom torch.distributed import init_process_group\ndevice = 'cuda'  # or 'cpu'\n"
        "init_process_group(backend='nccl' if 'cuda' in device else 'gloo')\n",
        "import torch\nfrom torch.distributed import init_process_group\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'  # or 'cpu'\n"
        "init_process_group(backend='nccl' if 'cuda' in device else 'gloo')\n",
    ),
]
