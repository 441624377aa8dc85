"""Move tensors to the device the set-up bound, not to a bare GPU index.

An integer means a GPU to torch: `.to(local_rank)`, `.cuda(rank)`, `torch.load(..., map_location=gpu)`
and `map_location=f"cuda:{x}"` fail on a CPU (gloo) run, where the set-up chose `cpu`
(`RuntimeError: Cannot access accelerator device when none is available.` with torch 2.13). The patch
uses the device variable the code already has (`device`, `*_device`, `self.device`); without one it
guards the index with `torch.cuda.is_available()`.
"""

from __future__ import annotations

import re

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider, QualifiedNameProvider, ScopeProvider

from distdoctor.patching.base import PatchCommand, PatchInfo

PATCH = PatchInfo(
    id="int_device",
    cause="nccl_without_cuda",
    title="Use the bound device instead of an integer GPU index in .to()/.cuda()/map_location",
    risk="The device variable found by name is assumed to be the one the set-up bound for this rank; "
         "`.cuda(i)` becomes `.to(...)`, which does not accept .cuda()'s non_blocking/memory_format "
         "positional forms.",
    prefilter=(".to(", ".cuda(", "map_location"),
)

# at most one word before the index name: ddp_local_rank, local_gpu_id (not device_from_device_id)
_INDEX_NAME = re.compile(
    r"^(?:[a-z0-9]+_)?(?:local_rank|rank|gpu|gpu_id|gpu_idx|gpu_index|device_id|device_idx|device_index|dev_id|gpu_num)$",
    re.IGNORECASE,
)
_DEVICE_NAME = re.compile(r"^(?:device|dev|(?!cpu_|meta_)[a-z0-9_]*_device)$", re.IGNORECASE)
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
        return name in ("get_rank", "current_device", "get_node_local_rank")
    return False


def is_gpu_string(node: cst.BaseExpression) -> bool:
    """`f"cuda:{x}"` or `"cuda:0"`."""
    if isinstance(node, cst.FormattedString):
        first = node.parts[0] if node.parts else None
        return isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda")
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value.startswith("cuda")
    return False


class Transformer(PatchCommand):
    """Replace integer GPU indices given to .to()/.cuda()/map_location by the bound device."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ScopeProvider)

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self.device_targets: dict[cst.CSTNode, int] = {}  # Name nodes holding a device -> line
        self.self_device: str | None = None

    def visit_Module(self, node: cst.Module) -> None:
        for assign in m.findall(node, m.Assign() | m.AnnAssign()):
            if assign.value is None or is_gpu_index(assign.value):
                continue  # `device = 0` is itself an index, not a bound device
            targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
            for target in targets:
                if isinstance(target, cst.Name) and _DEVICE_NAME.match(target.value):
                    self.device_targets[target] = self.get_metadata(PositionProvider, target).start.line
                elif m.matches(target, m.Attribute(value=m.Name("self"))) and _DEVICE_NAME.match(target.attr.value):
                    self.self_device = self.self_device or target.attr.value
        for param in m.findall(node, m.Param()):
            if _DEVICE_NAME.match(param.name.value):
                self.device_targets[param.name] = 0

    def _bound_device(self, site: cst.CSTNode) -> cst.BaseExpression | None:
        """The device variable visible at `site`, if the code has one."""
        scope = self.get_metadata(ScopeProvider, site, None)
        line = self.get_metadata(PositionProvider, site).start.line
        if scope is not None:
            preferred = sorted(self.device_targets.items(), key=lambda kv: (kv[0].value not in ("device", "dev"), kv[1]))
            for target, target_line in preferred:
                assignments = list(scope[target.value])
                if not assignments:
                    continue
                nodes = [getattr(a, "node", None) for a in assignments]
                if not all(n in self.device_targets or isinstance(n, cst.Param) for n in nodes):
                    continue
                if any(a.node in self.device_targets and self.device_targets[a.node] > line for a in assignments):
                    continue  # bound only after this line
                return cst.Name(target.value)
            if self.self_device and "self" in scope:
                return cst.Attribute(cst.Name("self"), cst.Name(self.self_device))
        return None

    def _replacement(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        device = self._bound_device(original)
        if device is not None:
            return device
        AddImportsVisitor.add_needed_import(self.context, "torch")
        return cst.IfExp(test=cst.parse_expression(_GUARD), body=updated.with_changes(lpar=[], rpar=[]),
                         orelse=cst.SimpleString('"cpu"'))

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        args = list(updated_node.args)
        method = None
        if m.matches(original_node.func, m.Attribute(attr=m.Name("to") | m.Name("cuda"))):
            method = original_node.func.attr.value
        is_load = any(q.name == "torch.load" for q in self.get_metadata(QualifiedNameProvider, original_node.func, set()))
        changed = False
        for i, arg in enumerate(original_node.args):
            if method and i == 0 and arg.keyword is None and not arg.star and is_gpu_index(arg.value):
                pass
            elif method and arg.keyword is not None and arg.keyword.value == "device" and is_gpu_index(arg.value):
                pass
            elif is_load and arg.keyword is not None and arg.keyword.value == "map_location" and (
                    is_gpu_index(arg.value) or is_gpu_string(arg.value)):
                pass
            else:
                continue
            new = self._replacement(arg.value, args[i].value)
            where = f".{method}()" if method else "torch.load(map_location=)"
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
]
