"""Pass device_ids/output_device to DistributedDataParallel only when the wrapped module is on CUDA."""

from __future__ import annotations

import ast
import libcst as cst
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import ParentNodeProvider

from distdoctor.patching.base import PatchCommand, PatchInfo
from distdoctor.patching.cstutil import ast_calls, calls_to, get_arg, is_none, parenthesize

PATCH = PatchInfo(
    id="ddp_cpu_args",
    cause="nccl_without_cuda",
    title="DistributedDataParallel(device_ids=..., output_device=...) get None when the module lives on the CPU",
    risk="None on a CUDA module would make DDP treat it as multi-device; the condition reads the module's own "
         "parameters, so CUDA modules keep their device_ids.",
    env_var=None,
    prefilter=("DistributedDataParallel",),
)

DDP = frozenset({"torch.nn.parallel.DistributedDataParallel",
                 "torch.nn.parallel.distributed.DistributedDataParallel"})
SIMPLE = (cst.Name, cst.Attribute)


def _ast_target(value: ast.AST) -> bool:
    """A device argument _plan would rewrite: neither None nor already `... if ... else None`."""
    if isinstance(value, ast.Constant) and value.value is None:
        return False
    return not (isinstance(value, ast.IfExp) and any(isinstance(v, ast.Constant) and v.value is None
                                                     for v in (value.body, value.orelse)))


def screen(tree: ast.Module) -> bool:
    """Cheap pre-check on Python's own parse: a DistributedDataParallel call with a device argument that is
    neither None nor already keyed to None."""
    return any(any(_ast_target(a) for a in c.args[1:3]) or any(
        k.arg in ("device_ids", "output_device") and _ast_target(k.value) for k in c.keywords)
               for c in ast_calls(tree, {"DistributedDataParallel"}))


def _is_dotted(node: cst.CSTNode) -> bool:
    """`model` or `self.model`: safe to evaluate twice."""
    if isinstance(node, cst.Attribute):
        return _is_dotted(node.value)
    return isinstance(node, cst.Name)


class Transformer(PatchCommand):
    """Give device_ids/output_device a CPU alternative (None) keyed on where the module's parameters are."""

    INFO = PATCH
    METADATA_DEPENDENCIES = (ParentNodeProvider,)  # the rest resolved on demand

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self.edits: dict[int, cst.Arg] = {}
        self.needs_torch = False

    def visit_Module(self, node: cst.Module) -> bool:
        for call in calls_to(self, DDP):
            self._plan(call)
        return bool(self.edits)  # nothing to rewrite: skip the traversal

    def _plan(self, node: cst.Call) -> None:
        module = get_arg(node, "module", 0)
        targets = [a for a in (get_arg(node, "device_ids", 1), get_arg(node, "output_device", 2))
                   if a is not None and not is_none(a.value) and not self._has_none_branch(a.value)]
        if module is None or not targets:
            return
        if _is_dotted(module.value):
            code = cst.Module([]).code_for_node(module.value)
            cond = f"next({code}.parameters()).is_cuda"
        else:
            cond = "torch.cuda.is_available()"
            self.needs_torch = True
        for arg in targets:
            self.edits[id(arg)] = arg.with_changes(value=cst.IfExp(
                test=cst.parse_expression(cond), body=parenthesize(arg.value), orelse=cst.Name("None")))
        names = "/".join(a.keyword.value if a.keyword else ("device_ids", "output_device")[node.args.index(a) - 1]
                         for a in targets)
        self.record(node, f"{names} -> None unless {cond}")

    @staticmethod
    def _has_none_branch(value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.IfExp) and (is_none(value.body) or is_none(value.orelse))

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return self.edits.get(id(original_node), updated_node)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if self.needs_torch and self.edits:
            AddImportsVisitor.add_needed_import(self.context, "torch")
        return updated_node


VALID = [
    # already CPU-safe: no device ids, or None
    "from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n",
    "import torch\nm = torch.nn.parallel.DistributedDataParallel(m, device_ids=None)\n",
    # already keyed on the module's device
    "from torch.nn.parallel import DistributedDataParallel as DDP\n"
    "model = DDP(model, device_ids=[rank] if next(model.parameters()).is_cuda else None)\n",
    # not torch's DDP
    "from mylib import DistributedDataParallel\nm = DistributedDataParallel(m, device_ids=[0])\n",
]

INVALID = [
    (
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "model = DDP(model, device_ids=[ddp_local_rank])\n",
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "model = DDP(model, device_ids=[ddp_local_rank] if next(model.parameters()).is_cuda else None)\n",
    ),
    (
        "import torch.nn as nn\n"
        "self.model = nn.parallel.DistributedDataParallel(self.model, device_ids=[self.gpu_id], output_device=self.gpu_id)\n",
        "import torch.nn as nn\n"
        "self.model = nn.parallel.DistributedDataParallel(self.model, device_ids=[self.gpu_id] if next(self.model.parameters()).is_cuda else None, output_device=self.gpu_id if next(self.model.parameters()).is_cuda else None)\n",
    ),
    (
        "from torch.nn.parallel import DistributedDataParallel\n"
        "ddp = DistributedDataParallel(Net().to(rank), [rank])\n",
        "from torch.nn.parallel import DistributedDataParallel\n"
        "import torch\n\n"
        "ddp = DistributedDataParallel(Net().to(rank), [rank] if torch.cuda.is_available() else None)\n",
    ),
]
