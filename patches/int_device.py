"""Move tensors to the device the set-up bound, not to a bare GPU index.

An integer means a GPU to torch: `.to(local_rank)`, `.cuda(rank)`, `torch.load(..., map_location=gpu)`
and `map_location=f"cuda:{x}"` (directly or through a local name, `loc = f"cuda:{x}"`) fail on a CPU
(gloo) run, where the set-up chose `cpu` (`RuntimeError: Cannot access accelerator device when none is
available.` / `RuntimeError: Attempting to deserialize object on a CUDA device but
torch.cuda.is_available() is False.` with torch 2.13). The patch uses a device variable the code
already binds in the same function (`device`, `*_device`, a parameter of that name, or `self.device`
set in the class's `__init__`) unless that variable holds an index or only CUDA; otherwise it guards
the index with `torch.cuda.is_available()`. A device-named variable computed as a GPU index by
`device = rank % torch.cuda.device_count()` becomes `"cpu"` when no GPU is available (its later
`.to(device)`/`device=device` then work unchanged).
Real code: pytorch/examples distributed/ddp-tutorial-series (multinode.py, multigpu_torchrun.py,
single_gpu.py); docs/real-repos.md findings 5, 9 and 13.
"""

from __future__ import annotations

import ast
import re

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import ClassScope, ComprehensionScope, FunctionScope, PositionProvider, \
    QualifiedNameProvider, ScopeProvider

from distdoctor.patching.base import PatchCommand, PatchInfo
from distdoctor.patching.cstutil import ast_ident, ast_nodes, ast_plain_string, nodes_of, walk

PATCH = PatchInfo(
    id="int_device",
    cause="nccl_without_cuda",
    title="Use the bound device instead of an integer GPU index in .to()/.cuda()/map_location",
    risk="The device variable found by name is assumed to be the one the set-up bound for this rank; "
         "`.cuda(i)` becomes `.to(...)`, which does not accept .cuda()'s non_blocking/memory_format "
         "positional forms.",
    prefilter=(".to(", ".cuda(", "map_location", "device_count"),
)

# at most one word before the index name: ddp_local_rank, local_gpu_id (not device_from_device_id)
_INDEX_NAME = re.compile(
    r"^(?:[a-z0-9]+_)?(?:local_rank|rank|gpu|gpu_id|gpu_idx|gpu_index|device_id|device_idx|device_index|dev_id|gpu_num)$",
    re.IGNORECASE,
)
_DEVICE_NAME = re.compile(r"^(?:device|dev|(?!cpu_|meta_)[a-z0-9_]*_device)$", re.IGNORECASE)
_INDEX_CALLS = ("get_rank", "current_device", "get_node_local_rank")
_LOADERS = {"torch.load", "torch.jit.load"}
_GUARD = "torch.cuda.is_available()"


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def is_gpu_index(node: cst.BaseExpression) -> bool:
    """An expression torch reads as a GPU: an int literal, a rank/GPU-index variable, int(...) of one."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Name):
        return bool(_INDEX_NAME.match(node.value))
    if isinstance(node, cst.Attribute):
        return bool(_INDEX_NAME.match(node.attr.value))
    if m.matches(node, m.Call(func=m.Name("int"))):
        return True  # int(os.environ["LOCAL_RANK"]) and the like
    if isinstance(node, cst.Call) and isinstance(node.func, (cst.Attribute, cst.Name)):
        name = node.func.attr.value if isinstance(node.func, cst.Attribute) else node.func.value
        return name in _INDEX_CALLS
    return False


def is_gpu_string(node: cst.BaseExpression) -> bool:
    """`f"cuda:{x}"`, `"cuda:0"`, `"cuda"`, `"cuda:%d" % x`, `"cuda:" + str(x)` or `"cuda:{}".format(x)`."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Modulo, cst.Add)):
        return is_gpu_string(node.left)
    if m.matches(node, m.Call(func=m.Attribute(value=m.SimpleString(), attr=m.Name("format")))):
        return is_gpu_string(node.func.value)
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return isinstance(value, str) and value.startswith("cuda")
    return False


def _ast_index(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        return bool(_INDEX_NAME.match(node.id))
    if isinstance(node, ast.Attribute):
        return bool(_INDEX_NAME.match(node.attr))
    if isinstance(node, ast.Call):
        name = ast_ident(node.func)
        return name == "int" or name in _INDEX_CALLS
    return False


def _ast_gpu_string(node: ast.AST) -> bool:
    """is_gpu_string() on Python's own parse."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        return _ast_gpu_string(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _ast_gpu_string(node.func.value)
    if isinstance(node, ast.JoinedStr):
        node = node.values[0] if node.values else node
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")


def _ast_sure_gpu_string(node: ast.AST) -> bool:
    """is_gpu_string() surely holds (Python's own parse; only plain literals, so never more than libcst's
    answer: what a guard test needs, where over-approximating would skip code the Transformer rewrites)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        return _ast_sure_gpu_string(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        node = node.func.value
    return (ast_plain_string(node) or "").startswith("cuda")


def _ast_gpu_location(node: ast.AST, gpu_names: set[str]) -> bool:
    """Transformer._is_gpu_location, with a name counted as a GPU when any assignment makes it one."""
    if _ast_index(node) or _ast_gpu_string(node):
        return True
    if isinstance(node, ast.Call) and ast_ident(node.func) == "device" \
            and node.args and _ast_gpu_string(node.args[0]):
        return True
    return isinstance(node, ast.Name) and node.id in gpu_names


def _ast_count_modulo(node: ast.AST) -> bool:
    """`x % <...device_count()...>`: a GPU index computed from the GPU count."""
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and any(
        ast_ident(c.func) == "device_count" for c in ast.walk(node.right) if isinstance(c, ast.Call))


def screen(tree: ast.Module) -> bool:
    """Cheap pre-check on Python's own parse: a .to()/.cuda() of an index, a map_location that is
    (or names) a GPU index or CUDA device, or `device = x % device_count()`."""
    for node in ast_nodes(tree, ast.Assign):
        if _ast_count_modulo(node.value) and any(
                isinstance(t, ast.Name) and _DEVICE_NAME.match(t.id) for t in node.targets):
            return True
    gpu_names: set[str] | None = None
    for node in ast_nodes(tree, ast.Call):
        func = node.func
        locations = [k.value for k in node.keywords if k.arg == "map_location"]
        if isinstance(func, ast.Attribute) and func.attr == "load" and len(node.args) >= 2:
            locations.append(node.args[1])
        if locations:
            if gpu_names is None:
                gpu_names = {t.id for a in ast_nodes(tree, ast.Assign)
                             if _ast_gpu_location(a.value, set())
                             for t in a.targets if isinstance(t, ast.Name)}
            if any(_ast_gpu_location(loc, gpu_names) for loc in locations):
                return True
        if any(k.arg == "device" and _ast_index(k.value) for k in node.keywords):
            return True  # .to(device=rank), torch.zeros(n, device=rank), evaluate(model, device=rank)
        if not isinstance(func, ast.Attribute):
            continue
        if func.attr in ("to", "cuda") and (
                (node.args and not isinstance(node.args[0], ast.Starred) and _ast_index(node.args[0]))
                or any(k.arg == "device" and _ast_index(k.value) for k in node.keywords)):
            return True
    return False


def _own_scope(scope):
    """The scope a name is bound in for code in `scope`: comprehensions see their function's names."""
    while isinstance(scope, ComprehensionScope) and scope.parent is not None:
        scope = scope.parent
    return scope


class Transformer(PatchCommand):
    """Replace integer GPU indices given to .to()/.cuda()/map_location by the bound device."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ScopeProvider)

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self.device_targets: dict[cst.CSTNode, int] = {}  # Name nodes holding a device -> line
        self.gpu_values: set[cst.CSTNode] = set()  # Name nodes assigned a CUDA string/device or an index
        self.index_devices: set[cst.CSTNode] = set()  # device-named Name nodes assigned an index
        self.cuda_devices: set[cst.CSTNode] = set()  # device-named Name nodes assigned a CUDA-only value
        # class -> attr -> [(function the assignment is in, line, usable)]
        self.self_devices: dict[cst.ClassDef, dict[str, list[tuple[cst.FunctionDef | None, int, bool]]]] = {}

    # -- survey ------------------------------------------------------------------------------------
    def _is_cuda_device(self, node: cst.BaseExpression) -> bool:
        """A value that names a CUDA device whatever the machine: "cuda:0", f"cuda:{i}", torch.device("cuda", i)."""
        if is_gpu_string(node):
            return True
        if isinstance(node, cst.Call) and node.args and any(
                q.name == "torch.device" for q in self.get_metadata(QualifiedNameProvider, node.func, set())):
            return is_gpu_string(node.args[0].value)
        return False

    def _enclosing(self, node: cst.CSTNode) -> tuple[cst.ClassDef | None, cst.FunctionDef | None]:
        """(class, method) when node is directly in a method's body, else (None, None)."""
        scope = _own_scope(self.get_metadata(ScopeProvider, node, None))
        if isinstance(scope, FunctionScope) and isinstance(scope.parent, ClassScope):
            return scope.parent.node, scope.node
        return None, None

    def visit_Module(self, node: cst.Module) -> None:
        for assign in nodes_of(self, cst.Assign, cst.AnnAssign):
            if assign.value is None:
                continue
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            index, cuda = is_gpu_index(assign.value), self._is_cuda_device(assign.value)
            for target in targets:
                line = self.get_metadata(PositionProvider, target).start.line
                if isinstance(target, cst.Name):
                    if index or cuda:
                        self.gpu_values.add(target)
                    if _DEVICE_NAME.match(target.value):
                        self.device_targets[target] = line
                        if index:
                            self.index_devices.add(target)  # `device = 0` is itself an index
                        elif cuda:
                            self.cuda_devices.add(target)  # `device = "cuda:0"`: CUDA whatever the machine
                elif m.matches(target, m.Attribute(value=m.Name("self"))) and _DEVICE_NAME.match(target.attr.value):
                    cls, func = self._enclosing(target)
                    if cls is not None:
                        self.self_devices.setdefault(cls, {}).setdefault(target.attr.value, []).append(
                            (func, line, not (index or cuda)))
        for param in nodes_of(self, cst.Param):
            if _DEVICE_NAME.match(param.name.value):
                self.device_targets[param.name] = 0

    # -- choice of the replacement ------------------------------------------------------------------
    def _bound_name(self, site: cst.CSTNode, line: int) -> cst.BaseExpression | None:
        """A device variable bound in the site's own scope (a local or parameter), before the site."""
        scope = _own_scope(self.get_metadata(ScopeProvider, site, None))
        if scope is None:
            return None
        names = sorted({t.value for t in self.device_targets}, key=lambda n: (n not in ("device", "dev"), n))
        for name in names:
            assignments = list(scope.assignments[name])  # this scope only: a global set elsewhere is no proof
            if not assignments:
                continue
            nodes = [getattr(a, "node", None) for a in assignments]
            nodes = [n.name if isinstance(n, cst.Param) else n for n in nodes]
            if any(n not in self.device_targets or n in self.index_devices or self.device_targets[n] > line
                   for n in nodes):
                continue  # a value not known to be a device, an index, or bound only after the site
            if all(n in self.cuda_devices for n in nodes):
                continue  # CUDA on every path: no help on a CPU run
            return cst.Name(name)
        return None

    def _bound_attr(self, site: cst.CSTNode, line: int) -> cst.BaseExpression | None:
        """`self.<device>` when the class's __init__ (or this method, earlier) sets it to a usable device."""
        cls, func = self._enclosing(site)
        if cls is None:
            return None
        for attr, sets in sorted(self.self_devices.get(cls, {}).items(), key=lambda kv: kv[0] != "device"):
            if not all(usable for _, _, usable in sets):
                continue
            if any((f is func and set_line < line) or (f is not func and f is not None and f.name.value == "__init__")
                   for f, set_line, _ in sets):
                return cst.Attribute(cst.Name("self"), cst.Name(attr))
        return None

    def _replacement(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        line = self.get_metadata(PositionProvider, original).start.line
        device = self._bound_name(original, line) or self._bound_attr(original, line)
        if device is not None:
            return device
        AddImportsVisitor.add_needed_import(self.context, "torch")
        return cst.IfExp(test=cst.parse_expression(_GUARD), body=updated.with_changes(lpar=[], rpar=[]),
                         orelse=cst.SimpleString('"cpu"'))

    def _is_gpu_location(self, node: cst.BaseExpression) -> bool:
        """A map_location that is a GPU: an index, a CUDA string/device, or a local name bound only to those."""
        if is_gpu_index(node) or self._is_cuda_device(node):
            return True
        if isinstance(node, cst.Name) and not _DEVICE_NAME.match(node.value):
            # `device` is the code's own choice (nanoGPT's `device = 'cuda'` config default, overridden
            # by --device=cpu): left to the set-up; `loc = f"cuda:{rank}"` is only a GPU
            scope = _own_scope(self.get_metadata(ScopeProvider, node, None))
            assignments = list(scope.assignments[node.value]) if scope is not None else []
            return bool(assignments) and all(getattr(a, "node", None) in self.gpu_values for a in assignments)
        return False

    def _cuda_api(self, call: cst.Call) -> bool:
        """torch.cuda.*(device=i) reads an index on a GPU run only: left alone."""
        names = {q.name for q in self.get_metadata(QualifiedNameProvider, call.func, set())}
        return any(n.startswith("torch.cuda.") for n in names)

    # -- rewrite --------------------------------------------------------------------------------------
    def _count_modulo(self, node: cst.BaseExpression) -> bool:
        """`x % torch.cuda.device_count()` (the count possibly wrapped, as in `max(..., 1)`)."""
        if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo)):
            return False
        return any(q.name == "torch.cuda.device_count"
                   for call in walk(node.right) if isinstance(call, cst.Call)
                   for q in self.get_metadata(QualifiedNameProvider, call.func, set()))

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        """`device = rank % torch.cuda.device_count()` -> `... if torch.cuda.is_available() else "cpu"`."""
        if len(original_node.targets) != 1 or not m.matches(original_node.targets[0].target, m.Name()) \
                or not _DEVICE_NAME.match(original_node.targets[0].target.value) \
                or not self._count_modulo(original_node.value):
            return updated_node
        AddImportsVisitor.add_needed_import(self.context, "torch")
        new = cst.IfExp(test=cst.parse_expression(_GUARD), body=updated_node.value,
                        orelse=cst.SimpleString('"cpu"'))
        self.record(original_node, f"{original_node.targets[0].target.value} = {_code(original_node.value)}: "
                                   f"\"cpu\" unless torch.cuda.is_available()")
        return updated_node.with_changes(value=new)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        args = list(updated_node.args)
        method = None
        func = original_node.func  # isinstance, not a matcher: this runs for every call of the file
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda"):
            method = func.attr.value
        is_load = bool({q.name for q in self.get_metadata(QualifiedNameProvider, original_node.func, set())} & _LOADERS)
        positional = [i for i, a in enumerate(original_node.args) if a.keyword is None and not a.star]
        changed = False
        for i, arg in enumerate(original_node.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            if method and positional[:1] == [i] and is_gpu_index(arg.value):
                pass
            elif keyword == "device" and is_gpu_index(arg.value) and (method or not self._cuda_api(original_node)):
                pass  # `.to(device=rank)`, `torch.zeros(n, device=rank)`, `evaluate(model, loader, device=rank)`
            elif is_load and (keyword == "map_location" or (keyword is None and positional[1:2] == [i])) \
                    and self._is_gpu_location(arg.value):
                pass
            else:
                continue
            new = self._replacement(arg.value, args[i].value)
            where = f".{method}()" if method else "torch.load(map_location=)" if is_load else \
                f"{_code(original_node.func)}(device=)"
            self.record(original_node, f"{where}: {_code(arg.value)} -> {_code(new)}")
            args[i] = args[i].with_changes(value=new)
            changed = True
        if not changed:
            return updated_node
        if method == "cuda":
            return updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name("to")), args=args)
        return updated_node.with_changes(args=args)


VALID = [
    # already a device
    "def f(model, device):\n    return model.to(device)\n",
    # dtypes and tensors are not indices
    "import torch\n\nx = y.to(torch.float16)\nz = y.to(other)\n",
    # a CPU map_location is fine
    "import torch\n\n\ndef load(path):\n    loc = 'cpu'\n    return torch.load(path, map_location=loc)\n",
]

INVALID = [
    (
        "import os\n"
        "import torch\n"
        "\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "device = torch.device(f'cuda:{local_rank}' if torch.cuda.is_available() else 'cpu')\n"
        "model = torch.nn.Linear(2, 2).to(local_rank)\n",
        "import os\n"
        "import torch\n"
        "\n"
        "local_rank = int(os.environ['LOCAL_RANK'])\n"
        "device = torch.device(f'cuda:{local_rank}' if torch.cuda.is_available() else 'cpu')\n"
        "model = torch.nn.Linear(2, 2).to(device)\n",
    ),
    (
        "import torch\n"
        "\n"
        "\n"
        "def load(path, gpu):\n"
        "    return torch.load(path, map_location=f'cuda:{gpu}')\n",
        "import torch\n"
        "\n"
        "\n"
        "def load(path, gpu):\n"
        "    return torch.load(path, map_location=f'cuda:{gpu}' if torch.cuda.is_available() else \"cpu\")\n",
    ),
    (
        # pytorch/examples ddp-tutorial-series multinode.py: resuming from a snapshot
        "import torch\n"
        "\n"
        "\n"
        "class Trainer:\n"
        "    def _load_snapshot(self, path):\n"
        '        loc = f"cuda:{self.local_rank}"\n'
        "        return torch.load(path, map_location=loc)\n",
        "import torch\n"
        "\n"
        "\n"
        "class Trainer:\n"
        "    def _load_snapshot(self, path):\n"
        '        loc = f"cuda:{self.local_rank}"\n'
        '        return torch.load(path, map_location=loc if torch.cuda.is_available() else "cpu")\n',
    ),
]
