"""Bind the GPU by the local rank where the code binds it by the global rank.

`torch.cuda.set_device(rank)`, `torch.accelerator.set_device_index(rank)`, `torch.device(f"cuda:{rank}")`,
`torch.device("cuda", rank)`, `.to(rank)`, `.cuda(rank)` and DDP's `device_ids=[rank]` / `output_device=rank`
with `rank` the GLOBAL rank (from `RANK`, `SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK` or
`dist.get_rank()`, followed through simple assignments and `self.<attr>`) use the local rank instead:
the local-rank variable the code already has, else `int(os.environ["LOCAL_RANK"])`. On node 2 and later
the global rank is past the node's GPU count (`CUDA error: invalid device ordinal`) or lands several ranks
on one GPU. Files that start workers with `torch.multiprocessing.spawn` are left alone: there the spawned
index is the local rank.
Field report: nanogpt-ddp-training-log.md (`CUDA error: invalid device ordinal` from set_device).
"""

from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import ClassScope, PositionProvider, QualifiedNameProvider, ScopeProvider

from distdoctor.patching.base import PatchCommand, PatchInfo
from distdoctor.patching.cstutil import ast_ident, ast_nodes, get_arg, literal_text, nodes_of, walk

PATCH = PatchInfo(
    id="local_rank_device",
    cause="local_rank_device",
    title="Bind the device by LOCAL_RANK instead of the global rank",
    risk="Assumes one process per GPU with LOCAL_RANK set by the launcher (torchrun, or mapped from "
         "SLURM_LOCALID); a program that already restricts CUDA_VISIBLE_DEVICES to one GPU per rank would "
         "want index 0 instead.",
    prefilter=("RANK", "get_rank", "SLURM_PROCID", "PMI_RANK"),
)

GLOBAL_ENV = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}
LOCAL_ENV = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}
GET_RANK = {"torch.distributed.get_rank", "torch.distributed.distributed_c10d.get_rank"}
GET_LOCAL_RANK = {"torch.distributed.get_node_local_rank", "torch.distributed.distributed_c10d.get_node_local_rank"}
SET_DEVICE = {"torch.cuda.set_device", "torch.accelerator.set_device_index", "torch.cuda.device",
              "torch.xpu.set_device"}
DDP = {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
       "torch.nn.DistributedDataParallel"}
SPAWN = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
         "torch.multiprocessing.spawn.spawn", "torch.multiprocessing.spawn.start_processes"}
LOCAL_NAMES = ("local_rank", "localrank", "local_rank_id")


SINKS = frozenset({"set_device", "set_device_index", "device", "to", "cuda"})


def _ast_ref(node: ast.AST) -> str | None:
    """`name` or `self.attr` (as "self.attr"): what an assignment can bind and a sink can read."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return "self." + node.attr
    return None


def _ast_global(node: ast.AST, tainted: set[str]) -> bool:
    """Transformer._kind(node) == "global", without name resolution: `int(os.environ["RANK"])` (any mapping
    subscripted with a global key: env copies too), `.get("RANK")`, `os.getenv("RANK")`, `get_rank()`, a
    name or attribute bound to one of these, or a call of a function that returns one."""
    env = node.args[0] if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "int" and node.args else node
    if isinstance(env, ast.Subscript) and isinstance(env.slice, ast.Constant) and env.slice.value in GLOBAL_ENV:
        return True
    if isinstance(env, ast.Call) and ast_ident(env.func) in ("get", "getenv") \
            and env.args and isinstance(env.args[0], ast.Constant) and env.args[0].value in GLOBAL_ENV:
        return True
    if isinstance(node, ast.Call) and (ast_ident(node.func) == "get_rank" or "()" + str(ast_ident(node.func)) in tainted):
        return True
    if isinstance(node, ast.Attribute) and "." + node.attr in tainted:
        return True
    return _ast_ref(node) in tainted


def _ast_sink_args(node: ast.AST) -> list[ast.AST]:
    """The expressions the Transformer may replace in one node (the GPU branch of a CPU fallback too)."""
    if isinstance(node, ast.JoinedStr):
        values = node.values
        return [v.value for prev, v in zip(values, values[1:]) if isinstance(v, ast.FormattedValue)
                and isinstance(prev, ast.Constant) and str(prev.value).endswith(("cuda:", "xpu:"))]
    if not isinstance(node, ast.Call):
        return []
    name = ast_ident(node.func)
    out = list(node.args[:2]) if name == "device" else list(node.args[:1]) if name in SINKS else []
    for k in node.keywords:
        if k.arg in ("device", "output_device", "device_ids"):
            out.append(k.value)
    flat = []
    for value in out:
        value = value.body if isinstance(value, ast.IfExp) else value
        flat += value.elts if isinstance(value, ast.List) else [value]
    return flat


_RETURNS: list = [None, []]  # the tree last asked, its functions with the valued returns inside each


def _ast_returns(tree: ast.Module) -> list[tuple[ast.AST, list[ast.Return]]]:
    """Every function of tree with the `return <value>` statements anywhere inside it (nested functions'
    included), computed once per tree for _ast_taint's rounds."""
    if _RETURNS[0] is not tree:
        # a statement lies inside a function exactly when its span lies inside the function's (statements
        # nest, never straddle): each function's returns are a slice of them all sorted by start, found by
        # bisection instead of a walk of every function (nested ones again for each enclosing one)
        valued = sorted((r for r in ast_nodes(tree, ast.Return) if r.value is not None),
                        key=lambda r: (r.lineno, r.col_offset))
        starts = [(r.lineno, r.col_offset) for r in valued]
        _RETURNS[:] = [tree, [(f, valued[bisect_left(starts, (f.lineno, f.col_offset)):
                                         bisect_right(starts, (f.end_lineno, f.end_col_offset))])
                              for f in ast_nodes(tree, ast.FunctionDef, ast.AsyncFunctionDef)]]
    return _RETURNS[1]


def _ast_taint(tree: ast.Module, tainted: set[str]) -> None:
    """One round of _ast_global's names: assignments (tuples element-wise), class fields and argparse
    defaults (as ".attr"), functions returning a global rank (as "()name", tuple elements included), and
    the parameters of functions called with one."""
    defs = ast_nodes(tree, ast.FunctionDef, ast.AsyncFunctionDef)
    for func, returns in _ast_returns(tree):
        for ret in returns:
            values = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
            if any(_ast_global(v, tainted) for v in values):
                tainted.add("()" + func.name)
                break
    params = {f.name: [a.arg for a in f.args.posonlyargs + f.args.args] for f in defs}
    for node in ast_nodes(tree, ast.Call, ast.ClassDef, ast.Assign, ast.AnnAssign):
        if isinstance(node, ast.Call):
            name = ast_ident(node.func)
            values = list(node.args) + [k.value for k in node.keywords]
            if name in params and any(_ast_global(v, tainted) for v in values):
                tainted.update(params[name])
            if name == "add_argument" and any(k.arg == "default" and _ast_global(k.value, tainted)
                                              for k in node.keywords):
                flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                tainted.update("." + f.lstrip("-").replace("-", "_") for f in flags)
                tainted.update("." + k.value.value for k in node.keywords
                               if k.arg == "dest" and isinstance(k.value, ast.Constant))
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None \
                        and _ast_global(stmt.value, tainted):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    tainted.update("." + t.id for t in targets if isinstance(t, ast.Name))
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            pairs = [(t, node.value) for t in targets]
            for t in targets:
                if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                    pairs += list(zip(t.elts, node.value.elts))
                elif isinstance(t, ast.Tuple) and _ast_global(node.value, tainted):
                    pairs += [(e, node.value) for e in t.elts]  # rank, local_rank = setup()
            for target, value in pairs:
                ref = _ast_ref(target)
                if ref is not None and _ast_global(value, tainted):
                    tainted.add(ref)


def screen(tree: ast.Module) -> bool:
    """Cheap pre-check on Python's own parse (scopes ignored, so it over-approximates the Transformer):
    a global rank, followed through assignments, returns, calls, fields and argparse defaults, reaches a
    device sink (set_device, torch.device, .to, .cuda, DDP's device_ids/output_device, an f"cuda:{...}")."""
    tainted: set[str] = set()
    for _ in range(3):
        _ast_taint(tree, tainted)
    return any(_ast_global(arg, tainted) for node in ast_nodes(tree, ast.Call, ast.JoinedStr)
               for arg in _ast_sink_args(node))


def _is_local_name(name: str) -> bool:
    low = name.lower()
    return any(low == n or low.endswith("_" + n) for n in LOCAL_NAMES)


class Transformer(PatchCommand):
    """Replace the global rank by the local rank wherever it selects a device."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ScopeProvider)
    COMPOSES_WITH = frozenset({"int_device", "ddp_cpu_args"})  # their rewrites of a call it fixes: see _fix

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self.global_targets: set[cst.CSTNode] = set()  # Name nodes assigned a global rank, Params passed one
        self.local_targets: dict[cst.Name, int] = {}  # Name nodes assigned a local rank -> line
        self.global_attrs: set[str] = set()  # self.<attr> assigned a global rank
        self.local_attrs: list[str] = []  # self.<attr> assigned a local rank
        self.skip = False
        self._name_counts: dict[str, int] = {}
        self.env_dicts: set[str] = set()  # names bound to a copy of os.environ
        self.fields: dict[str, str] = {}  # argparse dest / config field -> kind of its default
        self.returns: dict[str, str] = {}  # function name -> kind of every value it returns
        self.unpacked: dict[str, list[str | None]] = {}  # function name -> kind of each returned tuple element

    # -- classification ------------------------------------------------------------------------
    def _qnames(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def _env_key(self, node: cst.BaseExpression) -> str | None:
        """The variable name of `os.environ[K]`, `os.environ.get(K, ...)`, `os.getenv(K, ...)`, under int()."""
        if m.matches(node, m.Call(func=m.Name("int"))) and node.args:
            node = node.args[0].value
        if isinstance(node, cst.Subscript) and self._is_environ(node.value):
            key = node.slice[0].slice
        elif isinstance(node, cst.Call) and node.args and (
            self._qnames(node.func) & {"os.environ.get", "os.getenv"}
            or m.matches(node.func, m.Attribute(attr=m.Name("get"))) and self._is_environ(node.func.value)
        ):
            key = node.args[0].value
        else:
            return None
        if isinstance(key, cst.Index):
            key = key.value
        return key.evaluated_value if isinstance(key, cst.SimpleString) else None

    def _is_environ(self, node: cst.BaseExpression) -> bool:
        """`os.environ`, or a name bound to a copy of it (`os.environ.copy()`, `dict(os.environ)`, a dict
        comprehension over os.environ's keys or items)."""
        if "os.environ" in self._qnames(node):
            return True
        return isinstance(node, cst.Name) and node.value in self.env_dicts

    def _environ_copy(self, value: cst.BaseExpression) -> bool:
        if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("copy")))):
            return self._is_environ(value.func.value)
        if m.matches(value, m.Call(func=m.Name("dict"))) and value.args:
            return self._is_environ(value.args[0].value)
        if isinstance(value, cst.DictComp):
            return any(isinstance(n, (cst.Attribute, cst.Name)) and self._is_environ(n) for n in walk(value))
        return False

    def _kind(self, node: cst.BaseExpression) -> str | None:
        """'global', 'local' or None for an expression."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in self.returns:
            return self.returns[node.func.value]
        env = self._env_key(node)
        if env in GLOBAL_ENV:
            return "global"
        if env in LOCAL_ENV:
            return "local"
        if isinstance(node, cst.Call):
            names = self._qnames(node.func)
            if names & GET_RANK:
                return "global"
            if names & GET_LOCAL_RANK:
                return "local"
            return None
        if isinstance(node, cst.Name):
            if self._name_is(node, self.global_targets):
                return "global"
            if self._name_is(node, set(self.local_targets)) or (_is_local_name(node.value) and self._name_bound(node)):
                return "local"
            return None
        if m.matches(node, m.Attribute(value=m.Name("self"))):
            if node.attr.value in self.global_attrs:
                return "global"
            if node.attr.value in self.local_attrs:
                return "local"
        if isinstance(node, cst.Attribute) and _is_local_name(node.attr.value):
            return "local"  # args.local_rank, cfg.local_rank
        if isinstance(node, cst.Attribute) and not m.matches(node.value, m.Name("self")):
            return self.fields.get(node.attr.value)  # args.rank from an argparse default, cfg.rank a config field
        return None

    def _assignments(self, name: cst.Name):
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None:
            return []
        return list(scope[name.value])

    def _name_bound(self, name: cst.Name) -> bool:
        return bool(self._assignments(name))

    def _name_is(self, name: cst.Name, targets: set[cst.Name]) -> bool:
        assignments = self._assignments(name)
        return bool(assignments) and all(getattr(a, "node", None) in targets for a in assignments)

    def visit_Module(self, node: cst.Module) -> None:
        every_call = nodes_of(self, cst.Call)
        for call in every_call:
            if self._qnames(call.func) & SPAWN:
                self.skip = True
                return
        assigns = nodes_of(self, cst.Assign, cst.AnnAssign)
        for assign in assigns:
            if assign.value is not None and self._environ_copy(assign.value):
                targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
                self.env_dicts.update(t.value for t in targets if isinstance(t, cst.Name))
        functions = {f.name.value: f for f in nodes_of(self, cst.FunctionDef)}
        calls = [c for c in every_call if isinstance(c.func, cst.Name) and c.func.value in functions]
        options = [c for c in every_call if m.matches(c.func, m.Attribute(attr=m.Name("add_argument")))]
        self.returns_of: dict[cst.CSTNode, list[cst.BaseExpression]] = {}
        for ret in nodes_of(self, cst.Return):
            scope = self.get_metadata(ScopeProvider, ret, None)
            if ret.value is not None and scope is not None:
                self.returns_of.setdefault(getattr(scope, "node", None), []).append(ret.value)
        for _ in range(3):  # follow chains like rank = ddp_rank = int(os.environ["RANK"]) / r = rank
            self._survey_flow(node, functions, calls, options)
            for assign in assigns:
                if assign.value is None:
                    continue
                targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
                pairs = [(t, assign.value) for t in targets]
                if isinstance(assign.value, cst.Tuple):
                    pairs = [(te.value, ve.value) for t in targets if isinstance(t, cst.Tuple)
                             and len(t.elements) == len(assign.value.elements)
                             for te, ve in zip(t.elements, assign.value.elements)]
                elif m.matches(assign.value, m.Call(func=m.Name())) and assign.value.func.value in self.unpacked:
                    kinds = self.unpacked[assign.value.func.value]  # rank, local_rank, world = setup()
                    pairs = [(te.value, kind) for t in targets if isinstance(t, cst.Tuple)
                             and len(t.elements) == len(kinds) for te, kind in zip(t.elements, kinds)]
                for target, value in pairs:
                    kind = value if isinstance(value, str) or value is None else self._kind(value)
                    if isinstance(target, cst.Name) and self._in_class_body(assign) and kind is not None:
                        self.fields.setdefault(target.value, kind)  # a config/dataclass field
                    if isinstance(target, cst.Name):
                        if kind == "global":
                            self.global_targets.add(target)
                        elif kind == "local" or _is_local_name(target.value):
                            self.local_targets[target] = self.get_metadata(PositionProvider, target).start.line
                    elif m.matches(target, m.Attribute(value=m.Name("self"))):
                        if kind == "global":
                            self.global_attrs.add(target.attr.value)
                        elif kind == "local" and target.attr.value not in self.local_attrs:
                            self.local_attrs.append(target.attr.value)
            for t in (t for t in nodes_of(self, cst.AssignTarget) if isinstance(t.target, cst.Tuple)):  # ddp, rank, local_rank, world = get_info()
                for element in t.target.elements:
                    if isinstance(element.value, cst.Name) and _is_local_name(element.value.value):
                        self.local_targets[element.value] = self.get_metadata(PositionProvider, element.value).start.line

    def _in_class_body(self, assign: cst.CSTNode) -> bool:
        scope = self.get_metadata(ScopeProvider, assign, None)
        return isinstance(scope, ClassScope)

    def _survey_flow(self, module: cst.Module, functions: dict[str, cst.FunctionDef], calls: list[cst.Call],
                     options: list[cst.Call]) -> None:
        """Values that cross a function boundary or live in a namespace: what set-up helpers return
        (whole or tuple element by element), parameters that every call in the file passes a global rank
        (`demo_basic(rank)`), and argparse options whose default reads the environment."""
        for name, func in functions.items():
            returns = self.returns_of.get(func, [])
            if not returns:
                continue
            kinds = {self._kind(r) for r in returns}
            if len(kinds) == 1 and None not in kinds:
                self.returns[name] = kinds.pop()
            if all(isinstance(r, cst.Tuple) for r in returns) and len({len(r.elements) for r in returns}) == 1:
                per = [{self._kind(r.elements[i].value) for r in returns} for i in range(len(returns[0].elements))]
                self.unpacked[name] = [k.pop() if len(k) == 1 else None for k in per]
        for name, func in functions.items():
            sites = [c for c in calls if c.func.value == name]
            if not sites or self._referenced_elsewhere(module, name, len(sites)):
                continue
            params = list(func.params.params)
            if params and params[0].name.value in ("self", "cls"):
                continue
            for i, param in enumerate(params):
                args = [get_arg(c, param.name.value, i) for c in sites]
                if all(a is not None and self._kind(a.value) == "global" for a in args):
                    self.global_targets.add(param)
        for call in options:
            default = get_arg(call, "default")
            kind = self._kind(default.value) if default is not None else None
            dest = get_arg(call, "dest")
            flag = next((literal_text(a.value) for a in call.args if a.keyword is None), None)
            name = literal_text(dest.value) if dest is not None else (flag or "").lstrip("-").replace("-", "_")
            if kind is not None and name:
                self.fields.setdefault(name, kind)

    def _referenced_elsewhere(self, module: cst.Module, name: str, calls: int) -> bool:
        """The function is used other than by direct calls (passed to spawn, a thread, a callback)."""
        if not self._name_counts:
            for n in nodes_of(self, cst.Name):
                self._name_counts[n.value] = self._name_counts.get(n.value, 0) + 1
        return self._name_counts.get(name, 0) > calls + 1  # the def's own name and one per call

    # -- replacement ---------------------------------------------------------------------------
    def _local_for(self, site: cst.BaseExpression, quote: str = '"') -> cst.BaseExpression:
        """The local-rank expression to use where `site` (a global-rank expression) stands."""
        if m.matches(site, m.Attribute(value=m.Name("self"))) and self.local_attrs:
            return cst.Attribute(cst.Name("self"), cst.Name(self.local_attrs[0]))
        scope = self.get_metadata(ScopeProvider, site, None)
        line = self.get_metadata(PositionProvider, site).start.line
        if scope is not None:
            for target, target_line in sorted(self.local_targets.items(), key=lambda kv: kv[1]):
                assignments = list(scope[target.value])
                if not assignments or not all(getattr(a, "node", None) in self.local_targets for a in assignments):
                    continue
                if any(a.scope is scope and self.local_targets[a.node] > line for a in assignments):
                    continue
                return cst.Name(target.value)
        AddImportsVisitor.add_needed_import(self.context, "os")
        return cst.parse_expression(f"int(os.environ[{quote}LOCAL_RANK{quote}])")

    def _fix(self, original: cst.BaseExpression, updated: cst.BaseExpression, where: str,
             quote: str = '"') -> cst.BaseExpression:
        if isinstance(updated, cst.IfExp) and not isinstance(original, cst.IfExp):
            # int_device wrapped it in the same pass (`rank if torch.cuda.is_available() else "cpu"`)
            fixed = self._fix(original, updated.body, where, quote)
            return updated if fixed is updated.body else updated.with_changes(body=fixed)
        if isinstance(original, cst.IfExp) and isinstance(updated, cst.IfExp):
            # `rank if torch.cuda.is_available() else "cpu"` (int_device ran first): fix the GPU branch
            body = original.body
            if isinstance(body, cst.List) and isinstance(updated.body, cst.List):  # device_ids=[rank] if ...
                elements = [e.with_changes(value=fixed) if (fixed := self._fix(o.value, e.value, where, quote)) is not e.value
                            else e for o, e in zip(body.elements, updated.body.elements)]
                if all(a is b for a, b in zip(elements, updated.body.elements)):
                    return updated
                return updated.with_changes(body=updated.body.with_changes(elements=elements))
            fixed = self._fix(body, updated.body, where, quote)
            return updated if fixed is updated.body else updated.with_changes(body=fixed)
        if self.skip or self._kind(original) != "global":
            return updated
        local = self._local_for(original, quote)
        self.record(original, f"{where}: {cst.Module([]).code_for_node(original)} -> {cst.Module([]).code_for_node(local)}")
        return local

    def leave_FormattedString(self, original_node: cst.FormattedString, updated_node: cst.FormattedString):
        parts, new = original_node.parts, list(updated_node.parts)
        for i, part in enumerate(parts):
            if (isinstance(part, cst.FormattedStringExpression) and i > 0
                    and isinstance(parts[i - 1], cst.FormattedStringText)
                    and parts[i - 1].value.endswith(("cuda:", "xpu:"))):
                quote = "'" if '"' in original_node.start else '"'  # no nested quotes before Python 3.12
                fixed = self._fix(part.expression, new[i].expression, f"device string {parts[i - 1].value}{{...}}", quote)
                if fixed is not new[i].expression:
                    new[i] = new[i].with_changes(expression=fixed)
        if all(a is b for a, b in zip(new, updated_node.parts)):
            return updated_node
        return updated_node.with_changes(parts=new)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if self.skip:
            return updated_node
        names = self._qnames(original_node.func)
        args = list(updated_node.args)
        targets: list[tuple[int, str]] = []  # (argument index, what)
        positional = [i for i, a in enumerate(original_node.args) if a.keyword is None and not a.star]
        if names & SET_DEVICE and positional:
            targets.append((positional[0], sorted(names & SET_DEVICE)[0]))
        elif "torch.device" in names and len(positional) >= 2:
            targets.append((positional[1], "torch.device"))
        elif names & DDP:
            for i, a in enumerate(original_node.args):
                if a.keyword is not None and a.keyword.value == "output_device":
                    targets.append((i, "output_device"))
                elif a.keyword is not None and a.keyword.value == "device_ids" and isinstance(a.value, cst.IfExp):
                    targets.append((i, "device_ids"))
                elif a.keyword is not None and a.keyword.value == "device_ids" and isinstance(a.value, cst.List):
                    value = args[i].value  # `[rank] if ... else None` when ddp_cpu_args rewrote it in the same pass
                    wrapped = isinstance(value, cst.IfExp) and isinstance(value.body, cst.List)
                    listed = value.body if wrapped else value
                    elements = list(listed.elements)
                    for j, element in enumerate(a.value.elements):
                        fixed = self._fix(element.value, elements[j].value, "device_ids")
                        if fixed is not elements[j].value:
                            elements[j] = elements[j].with_changes(value=fixed)
                    if any(new is not old for new, old in zip(elements, listed.elements)):
                        listed = listed.with_changes(elements=elements)
                        args[i] = args[i].with_changes(value=value.with_changes(body=listed) if wrapped else listed)
        elif m.matches(original_node.func, m.Attribute(attr=m.Name("to") | m.Name("cuda"))):
            func = updated_node.func if isinstance(updated_node.func, cst.Attribute) else original_node.func
            method = func.attr.value  # `.to` when int_device renamed `.cuda` in the same pass
            if positional:
                targets.append((positional[0], f".{method}()"))
            targets += [(i, f".{method}(device=)") for i, a in enumerate(original_node.args)
                        if a.keyword is not None and a.keyword.value == "device"]
        for i, what in targets:
            fixed = self._fix(original_node.args[i].value, args[i].value, what)
            if fixed is not args[i].value:
                args[i] = args[i].with_changes(value=fixed)
        if all(new is old for new, old in zip(args, updated_node.args)):
            return updated_node  # unchanged: the same object (the engine tells rewrites by identity)
        return updated_node.with_changes(args=args)


VALID = [
    # already bound by the local rank
    "import os\nimport torch\n\nlocal_rank = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(local_rank)\n",
    # mp.spawn: the spawned index is the local rank
    "import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(rank, world):\n"
    "    torch.cuda.set_device(rank)\n\n\nmp.spawn(worker, args=(2,), nprocs=2)\n",
    # a parameter called rank is not known to be global
    "import torch\n\n\ndef setup(rank):\n    torch.cuda.set_device(rank)\n",
]

INVALID = [
    (
        "import os\n"
        "import torch\n"
        "\n"
        "rank = int(os.environ['RANK'])\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "torch.cuda.set_device(rank)\n"
        "device = torch.device(f'cuda:{rank}')\n",
        "import os\n"
        "import torch\n"
        "\n"
        "rank = int(os.environ['RANK'])\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "torch.cuda.set_device(local_rank)\n"
        "device = torch.device(f'cuda:{local_rank}')\n",
    ),
    (
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "class Trainer:\n"
        "    def __init__(self, model):\n"
        "        self.rank = dist.get_rank()\n"
        "        self.model = model.to(self.rank)\n",
        "import torch\n"
        "import torch.distributed as dist\n"
        "import os\n"
        "\n"
        "\n"
        "class Trainer:\n"
        "    def __init__(self, model):\n"
        "        self.rank = dist.get_rank()\n"
        '        self.model = model.to(int(os.environ["LOCAL_RANK"]))\n',
    ),
]
