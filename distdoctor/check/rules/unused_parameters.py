"""DD504 (warning): DDP over a model whose forward skips a submodule on some inputs, without
`find_unused_parameters=True`.

The skipped submodule's parameters get no gradient in that iteration and DDP's reduction never finishes
("Expected to have finished reduction in the prior iteration"). Whether the branch is ever taken cannot
be decided statically, hence a warning: check the branch, or pass find_unused_parameters=True.
"""

from __future__ import annotations

import libcst as cst

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.check.model import ident
from distdoctor.patching.cstutil import walk

RULE = RuleInfo("DD504", "unused_parameters", "DDP over a model whose forward skips parameters on some inputs",
                "warning")


def _self_calls(node) -> set[str]:
    return {n.func.attr.value for n in walk(node) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
            and isinstance(n.func.value, cst.Name) and n.func.value.value == "self"}


def _skips(forward: cst.FunctionDef) -> str | None:
    """A submodule called only inside an `if` on an input (or a random draw) of forward."""
    inputs = {p.name.value for p in forward.params.params[1:]}
    outside = set()
    branch_only: dict[str, str] = {}
    for stmt in walk(forward.body):
        if isinstance(stmt, cst.If):
            names = {n.value for n in walk(stmt.test) if isinstance(n, cst.Name)}
            random = any(isinstance(n, cst.Call) and ident(n.func) in ("rand", "random", "uniform") for n in walk(stmt.test))
            if names & inputs or random:
                other = _self_calls(stmt.orelse) if stmt.orelse is not None else set()
                for attr in _self_calls(stmt.body) ^ other:
                    branch_only.setdefault(attr, model_code(stmt.test))
    for stmt in forward.body.body:
        if not isinstance(stmt, cst.If):
            outside |= _self_calls(stmt)
    for attr, test in branch_only.items():
        if attr not in outside:
            return f"self.{attr} only under `if {test}`"
    return None


def model_code(node) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())[:40]


def check(model, out: FileResult) -> None:
    for name, cls in model.classes.items():
        for stmt in cls.body.body:
            if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "forward":
                skip = _skips(stmt)
                if skip:
                    out.marks.add(f"skips:{name}")
                    out.extra.setdefault("DD504", {})[name] = skip
    for site in model.sites:
        if site.ident not in api.DDP_WRAPPERS or not site.node.args:
            continue
        if api.first_arg(site, "find_unused_parameters", 99) is not None or \
                api.first_arg(site, "static_graph", 99) is not None:
            continue
        cls = _class_of(model, site, site.node.args[0].value)
        if cls:
            out.add_pending(model, site.node, RULE, f"DDP over {cls}, whose forward may skip parameters on some "
                                                    f"inputs: without find_unused_parameters=True the reduction of "
                                                    f"that step never finishes", unless=set(), when={f"skips:{cls}"})


def _class_of(model, site, arg) -> str | None:
    if isinstance(arg, cst.Call):
        return ident(arg.func)
    name = ident(arg)
    if isinstance(arg, cst.Name):
        values = [a.value for a in model.assigns if name in a.targets and a.func is site.func]
        if values and isinstance(values[0], cst.Call):
            return ident(values[0].func)
    return None


VALID = [
    "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\nclass Net(torch.nn.Module):\n"
    "    def forward(self, x):\n        return self.head(self.body(x))\n\nmodel = DDP(Net())\n",
    "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\nclass Net(torch.nn.Module):\n"
    "    def forward(self, x, aux=False):\n        y = self.body(x)\n        if aux:\n            y = y + self.aux(x)\n"
    "        return y\n\nmodel = DDP(Net(), find_unused_parameters=True)\n",
]

INVALID = [
    ("import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\nclass Net(torch.nn.Module):\n"
     "    def forward(self, x, aux=False):\n        y = self.body(x)\n        if aux:\n            y = y + self.aux(x)\n"
     "        return y\n\nnet = Net()\nmodel = DDP(net)\n", 12),
]
