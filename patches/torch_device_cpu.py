"""A CUDA `torch.device(...)` or accelerator binding in a distributed program falls back to the CPU.

`torch.device("cuda", local_rank)`, `torch.device(type="cuda", index=i)`, `torch.device(f"cuda:{i}")`,
`torch.device("cuda:%d" % i)` and `torch.device("cuda:{}".format(i))` name a GPU whatever the machine:
a set-up helper that returns one (and code that moves the model there) dies on a CPU run with
`AssertionError: Torch not compiled with CUDA enabled`. Outside a `torch.cuda.is_available()` test the
constructor becomes `torch.device(...) if torch.cuda.is_available() else torch.device("cpu")`.
The accelerator API has the same trap: `torch.accelerator.set_device_index(i)` raises `RuntimeError:
Cannot access accelerator device when none is available.` and
`dist.get_default_backend_for_device(torch.accelerator.current_accelerator())` gets None (a TypeError);
the first runs only when an accelerator is available, the second gets `"cpu"` (gloo) when there is none.
Only files that start a process group or wrap a model in DistributedDataParallel are touched.
Real code: pytorch/examples distributed/ddp/example.py (@77f55b9) uses the accelerator calls.
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor
from libcst.metadata import PositionProvider, QualifiedNameProvider

from distdoctor.patching.base import InPlaceRewrite, PatchInfo
from distdoctor.patching.cstutil import ast_any_unguarded, ast_ident, ast_nodes, get_arg, qualified_names, walk
from .int_device import _ast_gpu_string, _ast_sure_gpu_string, is_gpu_string

PATCH = PatchInfo(
    id="torch_device_cpu",
    cause="nccl_without_cuda",
    title="A CUDA torch.device or accelerator binding falls back to the CPU when there is none",
    risk="A program that must not run without a GPU now runs on the CPU (slowly) instead of failing "
         "at once.",
    prefilter=("device(", "set_device_index", "get_default_backend_for_device"),
)

TORCH_DEVICE = frozenset({"torch.device"})
SET_INDEX = frozenset({"torch.accelerator.set_device_index"})
BACKEND_FOR = frozenset({"torch.distributed.get_default_backend_for_device",
                         "torch.distributed.distributed_c10d.get_default_backend_for_device"})
DISTRIBUTED = ("init_process_group", "DistributedDataParallel")
GUARD = "torch.cuda.is_available()"
ACC_GUARD = "torch.accelerator.is_available()"


def _ast_cuda_device(node: ast.AST) -> bool:
    """`torch.device(<CUDA string>[, i])` or `torch.device(type="cuda", ...)` on Python's own parse."""
    if not (isinstance(node, ast.Call) and ast_ident(node.func) == "device"):
        return False
    if node.args and _ast_gpu_string(node.args[0]):
        return True
    return any(k.arg == "type" and _ast_gpu_string(k.value) for k in node.keywords)


GUARD_NAMES = frozenset({"is_available", "is_cuda", "device_count"})


def _guards(test: cst.BaseExpression) -> bool:
    """A test that checks for CUDA or an accelerator (`torch.cuda.is_available()`, `x.is_cuda`, ...) or
    compares with a CUDA device name (`device_type == "cuda"`, `"cuda" in device`)."""
    for n in walk(test):
        if isinstance(n, cst.Name) and n.value in GUARD_NAMES:
            return True
        if isinstance(n, cst.Comparison) and any(is_gpu_string(part) for part in
                                                 [n.left, *(c.comparator for c in n.comparisons)]):
            return True
    return False


def ast_guards(test: ast.AST) -> bool:
    """_guards() surely holds for this test on Python's own parse (every Name of libcst's tree is a Name or
    an attribute's name there; only plain CUDA literals count): a screen may skip what such a test guards."""
    for n in ast.walk(test):
        if isinstance(n, ast.Name) and n.id in GUARD_NAMES or isinstance(n, ast.Attribute) and n.attr in GUARD_NAMES:
            return True
        if isinstance(n, ast.Compare) and any(_ast_sure_gpu_string(p) for p in [n.left, *n.comparators]):
            return True
    return False


def _ast_first_args(call: ast.Call) -> list[ast.AST]:
    """What libcst's first argument of call may hold: the first positional one's value (a `*x` one's x), or
    the first keyword's (a `**x` one's x), as keywords may come before a `*x` in the source."""
    first = call.args[:1] + [k.value for k in call.keywords[:1]]
    return [a.value if isinstance(a, ast.Starred) else a for a in first]


def screen(tree: ast.Module) -> bool:
    """A distributed file with a CUDA torch.device, set_device_index or get_default_backend_for_device
    outside a test that already decides on CUDA (the Transformer leaves those alone)."""
    calls = ast_nodes(tree, ast.Call)
    if not any(ast_ident(node.func) in DISTRIBUTED for node in calls):
        return False
    found = [node for node in calls if _ast_cuda_device(node) or ast_ident(node.func) == "get_default_backend_for_device"
             and any(isinstance(v, (ast.Name, ast.Attribute, ast.Call)) for v in _ast_first_args(node))]
    found += [node for node in ast_nodes(tree, ast.Expr)
              if isinstance(node.value, ast.Call) and ast_ident(node.value.func) == "set_device_index"]
    return ast_any_unguarded(tree, found, ast_guards)


class Transformer(InPlaceRewrite):
    """Give hard-coded CUDA devices and accelerator calls a CPU path."""

    INFO = PATCH
    guard_depth = staticmethod(_guards)  # enclosing tests that already decide on CUDA
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def _cuda_device(self, call: cst.Call) -> bool:
        if not qualified_names(self, call.func) & TORCH_DEVICE:
            return False
        first = get_arg(call, "type", 0)
        return first is not None and is_gpu_string(first.value)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.guarded:
            return updated_node
        if self._cuda_device(original_node):
            AddImportsVisitor.add_needed_import(self.context, "torch")
            new = cst.IfExp(test=cst.parse_expression(GUARD), body=updated_node,
                            orelse=cst.parse_expression('torch.device("cpu")'))
            code = cst.Module([]).code_for_node(original_node)
            self.record(original_node, f"{code} -> CPU device unless {GUARD}")
            return self.in_place(original_node, new)
        if qualified_names(self, original_node.func) & BACKEND_FOR and updated_node.args:
            arg = updated_node.args[0]
            if isinstance(arg.value, (cst.Name, cst.Attribute, cst.Call)):
                value = cst.BooleanOperation(left=arg.value, operator=cst.Or(), right=cst.SimpleString('"cpu"'))
                self.record(original_node, "get_default_backend_for_device: no accelerator -> \"cpu\" (gloo)")
                return updated_node.with_changes(args=[arg.with_changes(value=value), *updated_node.args[1:]])
        return updated_node

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.BaseStatement:
        if self.guarded or len(original_node.body) != 1:
            return updated_node
        expr = original_node.body[0]
        if not (isinstance(expr, cst.Expr) and isinstance(expr.value, cst.Call)
                and qualified_names(self, expr.value.func) & SET_INDEX):
            return updated_node
        AddImportsVisitor.add_needed_import(self.context, "torch")
        self.record(original_node, f"set_device_index runs only when {ACC_GUARD}")
        return cst.If(test=cst.parse_expression(ACC_GUARD),
                      body=cst.IndentedBlock(body=[updated_node.with_changes(leading_lines=[])]),
                      leading_lines=updated_node.leading_lines)

    def visit_Module(self, node: cst.Module) -> bool:
        return any(isinstance(n, (cst.Name, cst.Attribute)) and
                   (n.value if isinstance(n, cst.Name) else n.attr.value) in DISTRIBUTED for n in walk(node))


VALID = [
    # chosen by the code's own device type (nanochat compute_init)
    "import torch\nimport torch.distributed as dist\n\n\ndef init(device_type, i):\n    if device_type == 'cuda':\n"
    "        dist.init_process_group('nccl')\n        return torch.device('cuda', i)\n",
    # already guarded
    "import torch\nimport torch.distributed as dist\n\ndist.init_process_group('gloo')\n"
    "device = torch.device('cuda', 0) if torch.cuda.is_available() else torch.device('cpu')\n",
    # not a distributed program
    "import torch\n\ndevice = torch.device('cuda', 0)\n",
    # a CPU device
    "import torch\nimport torch.distributed as dist\n\ndist.init_process_group('gloo')\ndevice = torch.device('cpu')\n",
]

INVALID = [
    (
        "import os\n"
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "def setup():\n"
        "    dist.init_process_group('gloo')\n"
        "    return torch.device('cuda', int(os.environ['LOCAL_RANK']))\n",
        "import os\n"
        "import torch\n"
        "import torch.distributed as dist\n"
        "\n"
        "\n"
        "def setup():\n"
        "    dist.init_process_group('gloo')\n"
        "    return torch.device('cuda', int(os.environ['LOCAL_RANK'])) if torch.cuda.is_available() "
        "else torch.device(\"cpu\")\n",
    ),
]
