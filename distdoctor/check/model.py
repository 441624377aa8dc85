"""The checker's code model of one file: every call and early exit with the rank guard it runs under.

One libcst parse per file; one walk over the statements carries the context a rule asks about: the
rank guard in force (`if rank == 0:`, `if not is_main_process():`, an early `return` taken on some
ranks, a rank-zero-only decorator, the main-process-first context managers), the enclosing function
and loop, and whether gradients are off. Names are resolved through the file's own import table
(`import torch.distributed as dist` makes `dist.barrier` `torch.distributed.barrier`), which is what
QualifiedNameProvider answers for imported names at a tenth of its cost; the checker never imports the code.
"""

from __future__ import annotations

import builtins
import dataclasses
import re
import sys
from dataclasses import dataclass
from typing import Iterator

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from distdoctor.patching.cstutil import literal_text, walk

# ---- what counts as a rank value ------------------------------------------------------------------

RANK_IDENTS = frozenset({"rank", "local_rank", "global_rank", "ddp_rank", "ddp_local_rank", "world_rank",
                         "node_rank", "proc_rank", "process_rank", "process_index", "local_process_index",
                         "rank_id", "my_rank", "gpu_id", "dist_rank", "_rank", "_local_rank", "_global_rank",
                         "get_rank", "get_local_rank", "get_global_rank", "get_node_local_rank",
                         "get_world_rank", "get_process_index"})
MAIN_FLAG = re.compile(r"^_?(is_)?(local_|global_|world_)?(master|main|rank_?0|rank_?zero|zero|global_zero|"
                       r"first_rank|lead)(_process|_proc|_rank|_node|_worker)?(_zero)?$")
NOT_MAIN_FLAGS = frozenset({"main", "zero", "lead", "master", "is_zero", "_main"})  # too generic alone
RANK_ENV = frozenset({"RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK",
                      "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "GROUP_RANK", "NODE_RANK"})
RANK_ZERO_DECORATORS = frozenset({"rank_zero_only", "main_process_only", "master_only", "on_main_process",
                                  "on_local_main_process", "rank0_only", "only_rank_zero", "on_rank_zero",
                                  "run_on_main_process", "main_process", "master_process_only"})
MAIN_FIRST = frozenset({"main_process_first", "local_main_process_first", "torch_distributed_zero_first",
                        "rank_zero_first", "distributed_zero_first", "zero_first", "main_first"})
EXTERNAL = frozenset(sys.stdlib_module_names) | frozenset({
    "torch", "numpy", "np", "wandb", "transformers", "datasets", "accelerate", "deepspeed", "tqdm", "yaml",
    "lightning", "pytorch_lightning", "torchvision", "tiktoken", "requests", "safetensors", "huggingface_hub",
    "mlflow", "tensorboard", "scipy", "pandas", "sklearn", "PIL", "einops", "timm", "fsspec", "boto3", "omegaconf",
    "hydra", "apex", "triton", "psutil", "matplotlib"})
BUILTINS = frozenset(dir(builtins))
MODULE_METHODS = frozenset({"train", "eval", "to", "cuda", "cpu", "forward", "parameters", "named_parameters",
                            "state_dict", "load_state_dict", "zero_grad", "step", "backward", "apply", "half",
                            "float", "item", "append", "get", "update", "format", "join", "__init__"})
LOCKS = frozenset({"FileLock", "SoftFileLock", "lock", "Lock", "file_lock", "filelock"})
# `if not ddp:` / `if fabric is None:` / `if world_size == 1:` -- the single-process branch, rank 0's only
DIST_FLAGS = frozenset({"ddp", "is_distributed", "distributed", "use_ddp", "is_ddp", "multi_gpu", "use_distributed",
                        "is_dist_avail_and_initialized", "is_initialized", "dist_initialized"})
DIST_HANDLES = frozenset({"fabric", "accelerator"})
# a rank inside one parallel dimension (data, tensor, pipeline, context, expert, sequence): `tp_rank == 0` holds on
# one process per group of that dimension, several in the job: a guard against every rank writing, not one rank
GROUP_RANK = re.compile(r"^_?(get_)?(dp|tp|pp|cp|ep|sp|mp|data_parallel|tensor_parallel|tensor_model_parallel|"
                        r"pipeline_parallel|pipeline_model_parallel|context_parallel|expert_parallel|"
                        r"expert_model_parallel|sequence_parallel|model_parallel)_(local_)?rank$")
WORLD_IDENTS = frozenset({"world_size", "ddp_world_size", "num_processes", "get_world_size", "num_replicas"})
NAN_CHECKS = frozenset({"isnan", "isinf", "isfinite", "is_nan", "has_nan"})


@dataclass(frozen=True)
class Guard:
    """Why a statement runs on some ranks only: `main` (rank 0 / the main process), `others` (every rank
    but 0), `some` (another subset), `group` (the first rank of each parallel group, `dp_rank == 0`: several
    processes, and collectives under it run on that group), `data` (a per-rank value such as the local loss being NaN), `solo`
    (the single-process branch, `if world_size == 1` / `if not ddp`: every rank of a distributed run takes
    the same side, and in a single process there is nobody to race with)."""

    polarity: str
    text: str  # the condition as written, `if rank == 0` / `@rank_zero_only` / `return when rank != 0`
    node: cst.CSTNode | None  # the `if` (or function) it comes from; FileModel.pos gives its line
    kind: str = "if"  # if | exit | decorator


@dataclass(eq=False)
class Func:
    name: str
    cls: str | None
    node: cst.CSTNode | None
    guard: Guard | None = None  # a rank-zero-only decorator
    no_grad: bool = False  # @torch.no_grad() / @torch.inference_mode()
    params: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """How calls name it (see FileModel.callee_key); a constructor is called by its class name."""
        if self.cls is None:
            return f"fn:{self.name}"
        return f"fn:{self.cls}" if self.name == "__init__" else f"meth:{self.name}"


@dataclass(eq=False)
class Site:
    """One call with its context."""

    node: cst.Call
    name: str  # dotted callee, imports resolved: torch.distributed.all_reduce, self.evaluate, model
    ident: str  # last identifier of the callee
    guard: Guard | None
    func: Func
    no_grad: bool
    main_first: bool  # inside `with main_process_first()`-like block
    loop: cst.CSTNode | None
    stmt_index: tuple[int, ...]  # position of the enclosing statement in the function (for "before/after")


@dataclass
class Exit:
    """An early return/continue/break taken under a rank-divergent condition."""

    node: cst.If
    what: str  # return | continue | break
    guard: Guard
    func: Func
    loop: cst.CSTNode | None
    stmt_index: tuple[int, ...]
    loop_index: tuple[int, ...] = ()  # statement path of the enclosing loop


@dataclass
class Assign:
    targets: tuple[str, ...]  # names bound (`self.x` as `self.x`)
    value: cst.BaseExpression
    func: Func
    node: cst.CSTNode


class FileModel:
    """Parse once, walk once: calls, exits, assignments, functions, classes and loops with their context."""

    def __init__(self, source: str, path: str = "<string>") -> None:
        self.path = path
        self.source = source
        self.module = cst.parse_module(source)
        self.imports: dict[str, str] = {}
        self.sites: list[Site] = []
        self.exits: list[Exit] = []
        self.assigns: list[Assign] = []
        self.functions: list[Func] = []
        self.classes: dict[str, cst.ClassDef] = {}
        self.loops: list[tuple[cst.CSTNode, Func, str]] = []  # (For/While, function, target text)
        self.discarded: set[int] = set()
        self.subscripts: list[cst.Subscript] = []  # ids of calls whose result is thrown away (an expression statement)
        self._positions = None
        self._rank_names: set[str] = set()
        self._flag_names: dict[str, str] = {}  # `should_log = get_rank() == metrics_rank` -> some
        self._collect_imports()
        self._collect_rank_names()
        top = Func("<module>", None, None)
        self.functions.append(top)
        self._block(self.module.body, _Ctx(top), ())

    # ---- positions, resolved once and only when a rule reports something ----
    def pos(self, node: cst.CSTNode) -> tuple[int, int]:
        if self._positions is None:
            self._positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        p = self._positions.get(node)
        return (p.start.line, p.start.column + 1) if p is not None else (0, 0)

    def code(self, node: cst.CSTNode) -> str:
        text = self.module.code_for_node(node).strip()
        text = " ".join(text.split())
        return text if len(text) <= 60 else text[:57] + "..."

    # ---- names ----
    def _statements(self, body) -> Iterator[cst.CSTNode]:
        """Every small statement (imports, assignments, ...) under body, through compound statements, without
        descending into expressions (libcst's `children` is the expensive part of a walk)."""
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine):
                yield from stmt.body
                continue
            for part in (getattr(stmt, "body", None), getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None)):
                while isinstance(part, cst.If):  # elif chains
                    yield from self._statements(part.body.body)
                    part = part.orelse
                if part is not None and hasattr(part, "body"):
                    inner = part.body
                    yield from self._statements(inner if isinstance(inner, (list, tuple)) else inner.body
                                                if hasattr(inner, "body") else ())
            for handler in getattr(stmt, "handlers", ()):
                yield from self._statements(handler.body.body)

    def _collect_imports(self) -> None:
        self._small = list(self._statements(self.module.body))
        for node in self._small:
            if isinstance(node, cst.Import):
                for alias in node.names:
                    full = cst.helpers.get_full_name_for_node(alias.name) or ""
                    if alias.asname is not None:
                        self.imports[alias.evaluated_alias or full] = full
                    else:
                        self.imports.setdefault(full.split(".")[0], full.split(".")[0])
            elif isinstance(node, cst.ImportFrom) and not isinstance(node.names, cst.ImportStar):
                base = cst.helpers.get_full_name_for_node(node.module) if node.module else ""
                for alias in node.names:
                    name = cst.helpers.get_full_name_for_node(alias.name) or ""
                    self.imports[alias.evaluated_alias or name] = f"{base}.{name}" if base else name

    def dotted(self, node: cst.CSTNode) -> str:
        """`dist.all_reduce` -> `torch.distributed.all_reduce`; calls and subscripts in the chain as `()`/`[]`."""
        if isinstance(node, cst.Name):
            return self.imports.get(node.value, node.value)
        if isinstance(node, cst.Attribute):
            return f"{self.dotted(node.value)}.{node.attr.value}"
        if isinstance(node, cst.Call):
            return self.dotted(node.func) + "()"
        if isinstance(node, cst.Subscript):
            return self.dotted(node.value) + "[]"
        return "?"

    def _collect_rank_names(self) -> None:
        """Names assigned a rank (`r = dist.get_rank()`) or a main-process flag (`master = rank == 0`,
        `log_here = dist.is_master()`)."""
        for _ in range(2):
            for node in self._small:
                if not isinstance(node, (cst.Assign, cst.AnnAssign)) or node.value is None:
                    continue
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
                for target in targets:
                    ident = _ident(target)
                    if ident is None:
                        continue
                    if self.is_rank_value(node.value):
                        self._rank_names.add(ident)
                    elif isinstance(node.value, cst.Call) and not node.value.args and self.is_main_flag(node.value):
                        self._flag_names[ident] = "main"  # with_tb_lg = dist.is_master() (VAR)
                    elif isinstance(node.value, (cst.Comparison, cst.UnaryOperation, cst.BooleanOperation)):
                        guard = self.rank_test(node.value)
                        if guard is not None:
                            self._flag_names[ident] = guard.polarity

    def is_rank_value(self, node: cst.CSTNode) -> bool:
        """A global or local rank: a rank-named variable or attribute, get_rank(), int(os.environ["RANK"])."""
        if isinstance(node, cst.Call):
            ident = _ident(node.func)
            if ident in ("int", "str") and node.args:
                return self.is_rank_value(node.args[0].value)
            if ident in ("get", "getenv") and node.args:
                return literal_text(node.args[0].value) in RANK_ENV
            return ident in RANK_IDENTS and ident.startswith("get_")
        if isinstance(node, cst.Subscript):
            if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                return literal_text(node.slice[0].slice.value) in RANK_ENV and "environ" in self.dotted(node.value)
            return False
        ident = _ident(node)
        if ident is None:
            return False
        low = ident.lower()
        return low in RANK_IDENTS or ident in self._rank_names

    def is_main_flag(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Call) and not node.args:
            node = node.func
        ident = _ident(node)
        if ident is None:
            return False
        low = ident.lower()
        return (bool(MAIN_FLAG.match(low)) and low not in NOT_MAIN_FLAGS) or self._flag_names.get(ident) == "main"

    def rank_test(self, test: cst.BaseExpression) -> Guard | None:
        """The guard a condition puts on its body, or None when every rank takes the same branch."""
        polarity = self._polarity(test)
        return Guard(polarity, f"if {self.code(test)}", None) if polarity else None

    def _polarity(self, test: cst.BaseExpression) -> str | None:
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and (
                _ident(test.expression.func if isinstance(test.expression, cst.Call) else test.expression)
                in DIST_FLAGS):
            return "solo"  # not distributed: this process is the only one
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            left, comp = test.left, test.comparisons[0]
            op = type(comp.operator).__name__
            lid = _ident(left.func if isinstance(left, cst.Call) else left)
            if (lid in DIST_HANDLES and op == "Is" and _is_none(comp.comparator)) or (
                    lid in WORLD_IDENTS and op in ("Equal", "LessThanEqual") and _int(comp.comparator) == 1):
                return "solo"
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._polarity(test.expression)
            return {"main": "others", "others": "main"}.get(inner, inner) if inner else None
        if isinstance(test, cst.BooleanOperation):
            found = [p for p in (self._polarity(test.left), self._polarity(test.right)) if p]
            if not found:
                return None
            # `not dist.is_initialized() or rank == 0`: the single-process side is the same on every rank of a
            # distributed run, so the other side says who runs the body
            found = [p for p in found if p != "solo"] or found
            return found[0] if len(set(found)) == 1 else "some"
        if self.is_main_flag(test):
            return "main"
        flag = _ident(test) if isinstance(test, (cst.Name, cst.Attribute)) else None
        if flag in self._flag_names:
            return self._flag_names[flag]
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and any(
                GROUP_RANK.match(_ident(n.func if isinstance(n, cst.Call) else n) or "")
                for n in (test.left, test.comparisons[0].comparator)):
            return "group"  # `dp_rank == 0`: one process per data-parallel group
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            left, comp = test.left, test.comparisons[0]
            right = comp.comparator
            if self.is_rank_value(right) and not self.is_rank_value(left):
                left, right = right, left
            if isinstance(left, cst.BinaryOperation) and self.is_rank_value(left.left):
                return "some"  # rank % 2 == 0
            if not self.is_rank_value(left):
                return None
            value = _int(right)
            op = type(comp.operator).__name__
            if value is not None and value < 0 or _is_none(right):
                return None  # `local_rank != -1`, `rank is None`: "are we distributed?", the same everywhere
            if op in ("In", "NotIn") and isinstance(right, (cst.List, cst.Tuple, cst.Set)):
                values = {_int(e.value) for e in right.elements}
                main = values <= {0, -1} and 0 in values
                return ("main" if op == "In" else "others") if main else "some"
            if value == 0:
                return {"Equal": "main", "Is": "main", "NotEqual": "others", "IsNot": "others",
                        "GreaterThan": "others", "LessThanEqual": "main"}.get(op, None)
            if value is not None and op in ("GreaterThanEqual",) and value <= 0:
                return None
            return "some"
        if self.is_rank_value(test) and not isinstance(test, cst.Call):
            return "others"  # `if rank:` / `if local_rank:`
        return None

    def nan_test(self, test: cst.BaseExpression) -> bool:
        """A condition on a per-rank value being NaN/inf (`if torch.isnan(loss)`, `if not math.isfinite(l)`)."""
        return any(isinstance(n, cst.Call) and _ident(n.func) in NAN_CHECKS for n in walk(test))

    # ---- the walk ----
    def _block(self, body, ctx: "_Ctx", index: tuple[int, ...]) -> None:
        ctx = ctx.copy()
        for i, stmt in enumerate(body):
            here = index + (i,)
            self._stmt(stmt, ctx, here)
            exit_guard = self._early_exit(stmt, ctx, here)
            if exit_guard is not None and exit_guard.polarity != "data":
                ctx.guard = ctx.guard or exit_guard

    def _early_exit(self, stmt, ctx: "_Ctx", index) -> Guard | None:
        """`if <rank test>: ...; return` with no else: the rest of the block runs on the other ranks only."""
        if not isinstance(stmt, cst.If) or stmt.orelse is not None:
            return None
        body = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else stmt.body.body
        if not body:
            return None
        last = body[-1]
        small = last.body[-1] if isinstance(last, cst.SimpleStatementLine) and last.body else None
        what = {cst.Return: "return", cst.Continue: "continue", cst.Break: "break"}.get(type(small))
        if what is None:
            return None
        guard = self.rank_test(stmt.test)
        if guard is not None and guard.polarity == "solo":
            return None
        if guard is not None:
            flipped = {"main": "others", "others": "main"}.get(guard.polarity, guard.polarity)
            guard = Guard(flipped, f"{what} under {guard.text}", stmt, "exit")
        elif self.nan_test(stmt.test):
            guard = Guard("data", f"{what} under if {self.code(stmt.test)}", stmt, "exit")
        else:
            return None
        self.exits.append(Exit(stmt, what, guard, ctx.func, ctx.loop, index, ctx.loop_index))
        return guard

    def _stmt(self, stmt, ctx: "_Ctx", index) -> None:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign, cst.AugAssign)) and small.value is not None:
                    targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                    names = tuple(n for t in targets for n in _bound(t))
                    self.assigns.append(Assign(names, small.value, ctx.func, small))
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    self.discarded.add(id(small.value))
                self._expr(small, ctx, index)
            return
        if isinstance(stmt, cst.If):
            self._expr(stmt.test, ctx, index)
            guard = self.rank_test(stmt.test)
            inner = ctx.with_guard(Guard(guard.polarity, guard.text, stmt) if guard else None)
            self._block(stmt.body.body, inner, index)
            if stmt.orelse is not None:
                other = None
                if guard is not None and guard.polarity != "solo":
                    flipped = {"main": "others", "others": "main"}.get(guard.polarity, guard.polarity)
                    other = Guard(flipped, f"else of {guard.text}", stmt)
                if isinstance(stmt.orelse, cst.If):
                    self._stmt(stmt.orelse, ctx.with_guard(other), index)
                else:
                    self._block(stmt.orelse.body.body, ctx.with_guard(other), index)
            return
        if isinstance(stmt, (cst.FunctionDef,)):
            self._function(stmt, ctx)
            return
        if isinstance(stmt, cst.ClassDef):
            self.classes.setdefault(stmt.name.value, stmt)
            inner = ctx.copy()
            inner.cls = stmt.name.value
            self._block(stmt.body.body, inner, index)
            return
        if isinstance(stmt, (cst.For, cst.While)):
            self._expr(stmt.iter if isinstance(stmt, cst.For) else stmt.test, ctx, index)
            target = self.code(stmt.target) if isinstance(stmt, cst.For) else ""
            self.loops.append((stmt, ctx.func, target))
            inner = ctx.copy()
            inner.loop, inner.loop_index = stmt, index
            self._block(stmt.body.body, inner, index)
            if stmt.orelse is not None:
                self._block(stmt.orelse.body.body, ctx, index)
            return
        if isinstance(stmt, cst.With):
            inner = ctx.copy()
            for item in stmt.items:
                self._expr(item.item, ctx, index)
                ident = _ident(item.item.func) if isinstance(item.item, cst.Call) else _ident(item.item)
                if ident in ("no_grad", "inference_mode"):
                    inner.no_grad = True
                if ident in MAIN_FIRST or ident in LOCKS:
                    inner.main_first = True  # the main process goes first, or one process at a time
            self._block(stmt.body.body, inner, index)
            return
        if isinstance(stmt, cst.Try):
            self._block(stmt.body.body, ctx, index)
            for handler in stmt.handlers:
                self._block(handler.body.body, ctx, index)
            for extra in (stmt.orelse, stmt.finalbody):
                if extra is not None:
                    self._block(extra.body.body, ctx, index)
            return
        # match statements and anything else: calls in it, no guards
        for child in stmt.children:
            self._expr(child, ctx, index)

    def _function(self, node: cst.FunctionDef, ctx: "_Ctx") -> None:
        guard, no_grad = None, False
        for dec in node.decorators:
            ident = _ident(dec.decorator.func) if isinstance(dec.decorator, cst.Call) else _ident(dec.decorator)
            if ident in RANK_ZERO_DECORATORS:
                guard = Guard("main", f"@{ident}", node, "decorator")
            if ident in ("no_grad", "inference_mode"):
                no_grad = True
            self._expr(dec.decorator, ctx, ())
        params = tuple(p.name.value for p in node.params.params)
        func = Func(node.name.value, ctx.cls, node, guard, no_grad, params)
        self.functions.append(func)
        inner = _Ctx(func, guard=guard, no_grad=no_grad)
        self._block(node.body.body if isinstance(node.body, cst.IndentedBlock) else node.body.body, inner, ())

    def _expr(self, node: cst.CSTNode, ctx: "_Ctx", index) -> None:
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, (cst.Lambda,)):
                continue
            if isinstance(current, cst.Subscript):
                self.subscripts.append(current)
            if isinstance(current, cst.Call):
                name = self.dotted(current.func)
                ident = _ident(current.func) or ""
                self.sites.append(Site(current, name, ident, ctx.guard, ctx.func, ctx.no_grad, ctx.main_first,
                                       ctx.loop, index))
            if isinstance(current, cst.IfExp):
                stack.append(current.test)  # the branches are not guarded statements; leave them
                continue
            stack.extend(syntax_children(current))

    # ---- queries rules share ----
    def callee_key(self, site: Site) -> str | None:
        """The name under which a call may reach a function of this repository: `fn:f` for `f()` and
        `utils.f()`, `meth:m` for `self.m()` and `obj.m()`; None for calls into the standard library or a
        well-known package (`torch.save`, `os.makedirs`) and for nn.Module's own methods (`model.train()`)."""
        func = site.node.func
        if isinstance(func, cst.Name):
            origin = self.imports.get(func.value, "")
            if origin.split(".")[0] in EXTERNAL or (not origin and func.value in BUILTINS):
                return None
            return f"fn:{func.value}"
        if isinstance(func, cst.Attribute):
            root = func.value
            while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
                root = root.func if isinstance(root, cst.Call) else root.value
            if isinstance(root, cst.Name) and root.value in self.imports:
                return None if self.imports[root.value].split(".")[0] in EXTERNAL else f"fn:{func.attr.value}"
            return None if func.attr.value in MODULE_METHODS else f"meth:{func.attr.value}"
        return None

    def calls(self, *idents: str) -> Iterator[Site]:
        wanted = set(idents)
        return (s for s in self.sites if s.ident in wanted)

    def wrapped_names(self, wrappers: frozenset[str]) -> set[str]:
        """Names (`model`, `self.model`) assigned the result of one of the wrapper calls (DDP, FSDP, ...)."""
        out = set()
        for a in self.assigns:
            value = a.value
            while isinstance(value, cst.Call) and _ident(value.func) in ("compile", "cast") and value.args:
                value = value.args[0].value
            if isinstance(value, cst.Call) and _ident(value.func) in wrappers:
                out.update(_strip_self(t) for t in a.targets)
        for site in self.sites:  # FSDP2: fully_shard(model) wraps in place
            if site.ident in wrappers and site.ident == "fully_shard" and site.node.args:
                ident = _ident(site.node.args[0].value)
                if ident:
                    out.add(ident)
        return out

    def mentions(self, *words: str) -> bool:
        return any(w in self.source for w in words)


@dataclass
class _Ctx:
    func: Func
    guard: Guard | None = None
    no_grad: bool = False
    main_first: bool = False
    loop: cst.CSTNode | None = None
    cls: str | None = None
    loop_index: tuple[int, ...] = ()

    def copy(self) -> "_Ctx":
        return _Ctx(self.func, self.guard, self.no_grad, self.main_first, self.loop, self.cls, self.loop_index)

    def with_guard(self, guard: Guard | None) -> "_Ctx":
        new = self.copy()
        if guard is not None and new.guard is not None and "solo" in (guard.polarity, new.guard.polarity):
            new.guard = guard if new.guard.polarity == "solo" else new.guard
        elif guard is not None:
            if new.guard is not None and new.guard.polarity != guard.polarity:
                guard = Guard("some", guard.text, guard.node, guard.kind)
            new.guard = new.guard if new.guard is not None and guard.polarity == new.guard.polarity else guard
        return new


_SKIP_FIELDS = ("lpar", "rpar", "comma", "dot", "equal", "lbracket", "rbracket", "semicolon", "colon", "operator",
                "header", "footer", "leading_lines", "lines_after_decorators", "asynchronous", "star", "arrow")
_FIELDS: dict[type, tuple[str, ...]] = {}


def syntax_children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The children of node that carry code (no whitespace, parentheses, commas, comments). libcst's own
    `children` visits every field through its transformer machinery, several times slower; the order of
    the result does not matter to the model."""
    names = _FIELDS.get(type(node))
    if names is None:
        names = _FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node)
                                            if not f.name.startswith(_SKIP_FIELDS) and "whitespace" not in f.name)
    out = []
    for name in names:
        value = getattr(node, name)
        kind = type(value)
        if kind is list or kind is tuple:
            out.extend(v for v in value if _is_node(type(v)))
        elif _is_node(kind):
            out.append(value)
    return out


_NODE_TYPES: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    """issubclass(kind, CSTNode), cached: CSTNode is an ABC and isinstance on it is slow."""
    known = _NODE_TYPES.get(kind)
    if known is None:
        known = _NODE_TYPES[kind] = issubclass(kind, cst.CSTNode)
    return known


def _ident(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _strip_self(name: str) -> str:
    return name[5:] if name.startswith("self.") else name


def _bound(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
        return [f"{target.value.value}.{target.attr.value}"]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _bound(e.value)]
    return []


def _int(node: cst.CSTNode) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.evaluated_value)
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(
            node.expression, cst.Integer):
        return -int(node.expression.evaluated_value)
    return None


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def ident(node: cst.CSTNode | None) -> str | None:
    return _ident(node)
