"""Bare CUDA calls in a training loop (`.cuda()` with no index, `torch.cuda.synchronize()`, `device="cuda"`
literals, SyncBatchNorm) get a CPU path.

`x.cuda()` / `model.cuda()` with no device and `torch.cuda.synchronize()` raise on a machine without
CUDA (`AssertionError: Torch not compiled with CUDA enabled` with torch 2.13's CPU wheel), so a training
loop that the other patches moved to gloo still dies at its first batch or timing call. Outside a test
that already checks for CUDA (`torch.cuda.is_available()`, `x.is_cuda`, `device == "cuda"`, a name such as
`args.cuda`/`use_cuda`):
  - a statement `model.cuda()`, `torch.cuda.synchronize()` or `torch.cuda.set_device(i)` runs only when
    `torch.cuda.is_available()` (set_device: where no process-group start beside it lets gloo_backend keep it
    to CUDA runs, as in a launcher's worker or an eval entry: YOLOX, 2026-11-27 section);
  - `x.cuda(non_blocking=True)` on a plain name, attribute or subscript becomes
    `x.cuda(non_blocking=True) if torch.cuda.is_available() else x` (the GPU path is the same call);
  - `.cuda()` on any other expression (a call, an operation) becomes
    `.to("cuda" if torch.cuda.is_available() else "cpu")`, so the receiver is still evaluated once;
  - a CUDA string literal given to a torch factory's `device=` (`torch.tensor(..., device="cuda")`, the
    MetricLogger of deit/dino/ConvNeXt/mae/detr), `.to_empty(device="cuda")` or `.to("cuda")` becomes
    `"cuda" if ... else "cpu"`;
  - a legacy CUDA tensor type made or set as the default (`torch.cuda.LongTensor(n)`,
    `torch.set_default_tensor_type(torch.cuda.HalfTensor)`, `x.type(torch.cuda.FloatTensor)`: `TypeError:
    type torch.cuda.LongTensor not available. Torch not compiled with CUDA enabled.` with torch 2.13)
    gets the CPU type of the same dtype when there is no CUDA (`torch.LongTensor`); a type only compared
    (`torch.cuda.HalfTensor in buckets`, isinstance) is left alone;
  - `torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)` keeps `model` when there is no CUDA (DDP
    refuses SyncBatchNorm on the CPU: `ValueError: SyncBatchNorm layers only work with GPU modules`), so
    a CPU run normalizes with each rank's own batch statistics.
`.cuda(i)` with an index is left to int_device; files that do not import torch are not touched.
Real code: facebookresearch/deit, ConvNeXt and mae engine*.py (`torch.cuda.synchronize()`) and utils
(`device='cuda'` meters), facebookresearch/dino main_dino.py, simsiam and moco-v3 (`model.cuda()`,
`im.cuda(non_blocking=True)`, SyncBatchNorm): docs/real-repos.md, 2026-11-24 section.
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from libcst.codemod.visitors import AddImportsVisitor

from distdoctor.patching.base import InPlaceRewrite, PatchInfo
from distdoctor.patching.cstutil import (
    ast_any_unguarded, ast_ident, ast_nodes, ast_root_name, nodes_of, qualified_names, walk,
)
from .torch_device_cpu import _guards, ast_guards

PATCH = PatchInfo(
    id="cuda_calls_cpu",
    cause="nccl_without_cuda",
    title="`.cuda()` without an index, unguarded torch.cuda.synchronize(), device=\"cuda\" literals and "
          "SyncBatchNorm get a CPU path",
    risk="On a CPU run SyncBatchNorm stays plain BatchNorm (per-rank statistics). `.cuda()` on an object that "
         "is neither a tensor nor a module: a statement or plain receiver keeps `.cuda()` on CUDA machines, but "
         "a computed receiver gets `.to(\"cuda\")`, which such an object may lack. A program that must not run "
         "without a GPU now runs on the CPU.",
    prefilter=(".cuda(", "'cuda", '"cuda', "synchronize(", "convert_sync_batchnorm", "reset_peak_memory_stats",
               "reset_max_memory", "reset_accumulated_memory", "ipc_collect",
               "set_device(", *(f"cuda.{t}" for t in (
                   "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
                   "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"))),
)

GUARD = "torch.cuda.is_available()"
# torch.cuda functions that raise without CUDA (torch 2.13 CPU wheel: AssertionError or AttributeError);
# empty_cache, manual_seed*, max_memory_allocated and memory_allocated return quietly and are left alone
RAISING = frozenset(f"torch.cuda.{name}" for name in (
    "synchronize", "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
    "reset_accumulated_memory_stats", "ipc_collect", "set_device"))
SYNC_BN = frozenset({"torch.nn.SyncBatchNorm.convert_sync_batchnorm",
                     "torch.nn.modules.batchnorm.SyncBatchNorm.convert_sync_batchnorm"})
LEGACY_TYPES = frozenset({"FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
                          "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"})
TYPE_TAKERS = frozenset({"torch.set_default_tensor_type"})  # and any `.type(...)` method call
CUDA_KEYWORDS = frozenset({"non_blocking", "memory_format"})  # .cuda() keywords that leave the device alone


def _bare_cuda(call: cst.Call) -> bool:
    """`<receiver>.cuda()` with no device: no positional argument, only non_blocking/memory_format."""
    func = call.func  # isinstance, not matchers: this runs for every call of the file
    if not (isinstance(func, cst.Attribute) and func.attr.value == "cuda"):
        return False
    if isinstance(func.value, cst.Call) and isinstance(func.value.func, cst.Name) and func.value.func.value == "super":
        return False  # an override of Module.cuda() calling its parent
    return all(a.keyword is not None and a.keyword.value in CUDA_KEYWORDS for a in call.args)


def _short(node: cst.CSTNode, width: int = 60) -> str:
    """node's code on one line, cut to width characters, for the change report."""
    code = " ".join(cst.Module([]).code_for_node(node).split())
    return code if len(code) <= width else code[: width - 3] + "..."


def _cuda_literal(node: cst.BaseExpression) -> bool:
    """A plain string literal naming a CUDA device: "cuda", 'cuda:0' (f-strings are other patches' business)."""
    if not isinstance(node, cst.SimpleString):
        return False
    value = node.evaluated_value
    return isinstance(value, str) and (value == "cuda" or value.startswith("cuda:"))


def _plain(node: cst.BaseExpression) -> bool:
    """A receiver that can be named twice without a second evaluation: `x`, `self.model`, `images[0]`."""
    if isinstance(node, cst.Name):
        return True
    if isinstance(node, cst.Attribute):
        return _plain(node.value)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
        index = node.slice[0].slice.value
        return _plain(node.value) and isinstance(index, (cst.Integer, cst.Name, cst.SimpleString))
    return False


def _flag(node: cst.CSTNode) -> bool:
    """A name like `use_cuda`, `args.cuda`, `cfg.no_cuda` (not torch's own `torch.cuda` module)."""
    if isinstance(node, cst.Name):
        return "cuda" in node.value.lower() and node.value != "cuda"
    if isinstance(node, cst.Attribute):
        return "cuda" in node.attr.value.lower() and not m.matches(node.value, m.Name("torch"))
    return False


def _cuda_test(test: cst.BaseExpression) -> bool:
    """A test that already decides on CUDA: torch_device_cpu's guards, or a flag named after CUDA."""
    return _guards(test) or any(_flag(n) for n in walk(test))


def _ast_flag(node: ast.AST) -> bool:
    """_flag() holds for this node or for the Name libcst makes of an attribute's name."""
    if isinstance(node, ast.Name):
        return "cuda" in node.id.lower() and node.id != "cuda"
    if isinstance(node, ast.Attribute):
        return "cuda" in node.attr.lower() and (node.attr != "cuda" or not _ast_is_torch(node.value))
    return False


def _ast_is_torch(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "torch"


def _ast_cuda_test(test: ast.AST) -> bool:
    """_cuda_test() surely holds for this test on Python's own parse."""
    return ast_guards(test) or any(_ast_flag(n) for n in ast.walk(test))


def _ast_candidate(node: ast.Call, roots: set[str]) -> bool:
    """A call leave_Call may rewrite: `.cuda()` without an index, a CUDA device literal given to `.to()`,
    `.to_empty()` or a name that can resolve into torch, or convert_sync_batchnorm through such a name.
    roots: the names a torch qualified name can start from (imported ones, and `torch` itself)."""
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "cuda" and not node.args \
            and all(k.arg in CUDA_KEYWORDS for k in node.keywords):
        return True
    if ast_ident(func) == "convert_sync_batchnorm":
        return ast_root_name(func) in roots
    if any(_ast_cuda_literal(a) for a in node.args[:1]) and ast_ident(func) == "to":
        return True
    return any(k.arg == "device" and _ast_cuda_literal(k.value) for k in node.keywords) and (
        isinstance(func, ast.Attribute) and func.attr in ("to", "to_empty") or ast_root_name(func) in roots)


def _ast_legacy_type(node: ast.AST) -> bool:
    """`<x>.cuda.LongTensor` and the like (a CUDA-only tensor type)."""
    return isinstance(node, ast.Attribute) and node.attr in LEGACY_TYPES \
        and isinstance(node.value, ast.Attribute) and node.value.attr == "cuda"


def _ast_legacy_use(node: ast.Call) -> bool:
    """A call that makes a CUDA tensor type, or hands one to set_default_tensor_type()/.type()."""
    return _ast_legacy_type(node.func) or ast_ident(node.func) in ("set_default_tensor_type", "type") \
        and bool(node.args) and _ast_legacy_type(node.args[0])


def _ast_cuda_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) \
        and (node.value == "cuda" or node.value.startswith("cuda:"))


def screen(tree: ast.Module) -> bool:
    """A torch file with, outside a test that already decides on CUDA, `.cuda()` without an index, a CUDA
    device literal, convert_sync_batchnorm, or a statement calling a raising torch.cuda function through
    a name that can resolve to it (imported, or `torch` itself: not `stream.synchronize()`)."""
    torch_imported = False
    imported: set[str] = {"torch"}
    raising = {name.rsplit(".", 1)[1] for name in RAISING}
    for node in ast_nodes(tree, ast.Import, ast.ImportFrom):
        if isinstance(node, ast.Import):
            imported.update(a.asname or a.name.split(".")[0] for a in node.names)
            torch_imported = torch_imported or any(a.name.split(".")[0] == "torch" for a in node.names)
        else:
            imported.update(a.asname or a.name for a in node.names)
            raising.update(a.asname for a in node.names if a.asname and a.name in raising)
            torch_imported = torch_imported or (node.module or "").split(".")[0] == "torch" and not node.level
    if not torch_imported:
        return False
    found = [n for n in ast_nodes(tree, ast.Call) if _ast_candidate(n, imported) or _ast_legacy_use(n)]
    found += [n for n in ast_nodes(tree, ast.Expr) if isinstance(n.value, ast.Call)
              and ast_ident(n.value.func) in raising and ast_root_name(n.value.func) in imported]
    return ast_any_unguarded(tree, found, _ast_cuda_test)


class Transformer(InPlaceRewrite):
    """Guard `.cuda()` without an index and raising torch.cuda calls with torch.cuda.is_available()."""

    INFO = PATCH
    guard_depth = staticmethod(_cuda_test)  # enclosing tests that already decide on CUDA

    def __init__(self, context, options=None) -> None:
        super().__init__(context, options)
        self.statements: set[int] = set()  # ids of calls that are a whole statement (guarded by an `if`)

    def visit_Module(self, node: cst.Module) -> bool:
        return any(isinstance(n, cst.Import) and any((cst.helpers.get_full_name_for_node(a.name) or "")
                                                    .split(".")[0] == "torch" for a in n.names)
                   or isinstance(n, cst.ImportFrom) and not n.relative and n.module is not None
                   and (cst.helpers.get_full_name_for_node(n.module) or "").split(".")[0] == "torch"
                   for n in (*nodes_of(self, cst.Import), *nodes_of(self, cst.ImportFrom)))  # the file's index

    # -- rewrites ----------------------------------------------------------------------------------------
    def _raising(self, call: cst.Call) -> bool:
        return bool(qualified_names(self, call.func) & RAISING)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) == 1 and isinstance(node.body[0], cst.Expr) and isinstance(node.body[0].value, cst.Call):
            call = node.body[0].value
            if _bare_cuda(call) or self._raising(call):
                self.statements.add(id(call))

    def _literal_device(self, call: cst.Call) -> int | None:
        """Index of the argument that is a CUDA literal: `device=` of a torch function, or `.to()`'s first."""
        for i, arg in enumerate(call.args):
            if not _cuda_literal(arg.value):
                continue
            if arg.keyword is not None and arg.keyword.value == "device" and (
                    m.matches(call.func, m.Attribute(attr=m.Name("to") | m.Name("to_empty")))
                    or any(q.startswith("torch.") for q in qualified_names(self, call.func))):
                return i
            if i == 0 and arg.keyword is None and m.matches(call.func, m.Attribute(attr=m.Name("to"))):
                return i
        return None

    def _legacy_type(self, node: cst.BaseExpression) -> str | None:
        """The dtype's type name when node is `torch.cuda.<X>Tensor`, else None."""
        if not (isinstance(node, cst.Attribute) and node.attr.value in LEGACY_TYPES):
            return None
        return node.attr.value if f"torch.cuda.{node.attr.value}" in qualified_names(self, node) else None

    def _cpu_type(self, node: cst.BaseExpression, name: str) -> cst.IfExp:
        AddImportsVisitor.add_needed_import(self.context, "torch")
        return cst.IfExp(test=cst.parse_expression(GUARD), body=node.with_changes(lpar=[], rpar=[]),
                         orelse=cst.parse_expression(f"torch.{name}"))

    def _legacy_call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call | None:
        """`torch.cuda.LongTensor(n)` -> `(... if GUARD else torch.LongTensor)(n)`; a CUDA type given to
        set_default_tensor_type() or `.type()` -> `... if GUARD else torch.<X>Tensor`."""
        name = self._legacy_type(original_node.func)
        if name is not None:
            self.record(original_node, f"torch.cuda.{name}: torch.{name} unless {GUARD}")
            return updated_node.with_changes(func=self._cpu_type(updated_node.func, name).with_changes(
                lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
        first = original_node.args[0] if original_node.args else None
        if first is None or first.keyword is not None or first.star:
            return None
        name = self._legacy_type(first.value)
        if name is None or not (m.matches(original_node.func, m.Attribute(attr=m.Name("type")))
                                or qualified_names(self, original_node.func) & TYPE_TAKERS):
            return None
        self.record(original_node, f"{_short(original_node.func)}(torch.cuda.{name}): torch.{name} unless {GUARD}")
        args = list(updated_node.args)
        args[0] = args[0].with_changes(value=self._cpu_type(args[0].value, name))
        return updated_node.with_changes(args=args)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if self.guarded or id(original_node) in self.statements:
            return updated_node
        legacy = self._legacy_call(original_node, updated_node)
        if legacy is not None:
            return legacy
        literal = self._literal_device(original_node)
        if literal is not None:
            AddImportsVisitor.add_needed_import(self.context, "torch")
            arg = updated_node.args[literal]
            value = cst.IfExp(test=cst.parse_expression(GUARD), body=arg.value, orelse=cst.SimpleString('"cpu"'))
            self.record(original_node, f"device {arg.value.value} -> \"cpu\" unless {GUARD}")
            args = list(updated_node.args)
            args[literal] = arg.with_changes(value=value)
            return updated_node.with_changes(args=args)
        if qualified_names(self, original_node.func) & SYNC_BN and original_node.args \
                and original_node.args[0].keyword is None and _plain(original_node.args[0].value):
            AddImportsVisitor.add_needed_import(self.context, "torch")
            new = cst.IfExp(test=cst.parse_expression(GUARD), body=updated_node,
                            orelse=updated_node.args[0].value.with_changes(lpar=[], rpar=[]))
            self.record(original_node, f"SyncBatchNorm only when {GUARD} (DDP refuses it on the CPU)")
            return self.in_place(original_node, new)
        if not _bare_cuda(original_node):
            return updated_node
        AddImportsVisitor.add_needed_import(self.context, "torch")
        receiver = updated_node.func.value
        code = _short(original_node)
        if _plain(original_node.func.value):
            new = cst.IfExp(test=cst.parse_expression(GUARD), body=updated_node,
                            orelse=receiver.with_changes(lpar=[], rpar=[]))
            self.record(original_node, f"{code}: only when {GUARD}")
            return self.in_place(original_node, new)
        device = cst.Arg(cst.parse_expression(f'"cuda" if {GUARD} else "cpu"'))
        self.record(original_node, f"{code}: .to(\"cuda\" if {GUARD} else \"cpu\")")
        return updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name("to")),
                                         args=[device, *updated_node.args])

    def leave_SimpleStatementLine(self, original_node: cst.SimpleStatementLine,
                                  updated_node: cst.SimpleStatementLine) -> cst.BaseStatement:
        if self.guarded or len(original_node.body) != 1:
            return updated_node
        expr = original_node.body[0]
        if not (isinstance(expr, cst.Expr) and id(expr.value) in self.statements):
            return updated_node
        AddImportsVisitor.add_needed_import(self.context, "torch")
        code = _short(expr.value)
        self.record(original_node, f"{code} runs only when {GUARD}")
        return cst.If(test=cst.parse_expression(GUARD),
                      body=cst.IndentedBlock(body=[updated_node.with_changes(leading_lines=[])]),
                      leading_lines=updated_node.leading_lines)


VALID = [
    # already decided on CUDA
    "import torch\n\nif torch.cuda.is_available():\n    model.cuda()\n    torch.cuda.synchronize()\n",
    "import torch\n\nx = x.cuda() if args.cuda else x\n",
    # an index: int_device's job
    "import torch\n\nmodel.cuda(args.gpu)\nx = x.cuda(0, non_blocking=True)\n",
    # calls that do not raise without CUDA
    "import torch\n\ntorch.cuda.empty_cache()\ntorch.cuda.manual_seed_all(0)\nm = torch.cuda.max_memory_allocated()\n",
    # not a torch file
    "import cupy\n\nx = y.cuda()\n",
]

INVALID = [
    (
        "import torch\n"
        "\n"
        "\n"
        "def train_one_epoch(model, loader):\n"
        "    model.cuda()\n"
        "    for images in loader:\n"
        "        images = images.cuda(non_blocking=True)\n"
        "        loss = model(images).sum()\n"
        "        torch.cuda.synchronize()\n"
        "    labels = torch.arange(4).cuda()\n"
        "    return torch.tensor([1.0], device='cuda').to('cuda:0')\n",
        "import torch\n"
        "\n"
        "\n"
        "def train_one_epoch(model, loader):\n"
        "    if torch.cuda.is_available():\n"
        "        model.cuda()\n"
        "    for images in loader:\n"
        "        images = images.cuda(non_blocking=True) if torch.cuda.is_available() else images\n"
        "        loss = model(images).sum()\n"
        "        if torch.cuda.is_available():\n"
        "            torch.cuda.synchronize()\n"
        "    labels = torch.arange(4).to(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
        "    return torch.tensor([1.0], device='cuda' if torch.cuda.is_available() else \"cpu\")"
        ".to('cuda:0' if torch.cuda.is_available() else \"cpu\")\n",
    ),
]
