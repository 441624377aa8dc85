"""DD403: `mp.spawn(..., nprocs=torch.cuda.device_count())` with no CPU fallback.

On a machine without GPUs (a CPU test node, a container without the GPU runtime) that starts zero workers
and the program exits 0 having trained nothing. Fall back (`max(1, ...)`, `... if torch.cuda.is_available()
else N`) or fail loudly when there is no GPU.
"""

from __future__ import annotations

import libcst as cst

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.check.model import ident
from distdoctor.check.rules._everyone import is_spawn
from distdoctor.patching.cstutil import walk

RULE = RuleInfo("DD403", "single_process_launch", "mp.spawn(nprocs=device_count()) with no CPU fallback")


def _plain_attr(node) -> bool:
    """`args.nprocs`: an attribute of a plain name, which the file may assign like a variable."""
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)


def _is_count(node) -> bool:
    return isinstance(node, cst.Call) and ident(node.func) == "device_count"


_NOTICES = frozenset({"warn", "warning", "print", "info", "debug"})


def _only_notice(node) -> bool:
    """`if not torch.cuda.is_available(): warnings.warn(...)`: says so and goes on, no fallback."""
    return isinstance(node, cst.If) and node.orelse is None and all(
        isinstance(stmt, cst.SimpleStatementLine) and all(
            isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and ident(small.value.func) in _NOTICES
            for small in stmt.body) for stmt in node.body.body)


def _code(node) -> str:
    return cst.Module([]).code_for_node(node)


def _checked(func_node, module, name: str | None) -> bool:
    """An assert or if before the spawn tests the count or CUDA's availability (a loud failure or a branch)."""
    for node in walk(func_node if func_node is not None else module):
        if isinstance(node, (cst.Assert, cst.If, cst.IfExp, cst.While)) and not _only_notice(node):
            for sub in walk(node.test):
                if (name and isinstance(sub, (cst.Name, cst.Attribute)) and _code(sub) == name) or (
                        isinstance(sub, (cst.Name, cst.Attribute)) and ident(sub) in ("is_available", "device_count")):
                    return True
    return False


def check(model, out: FileResult) -> None:
    for site in model.sites:
        if not is_spawn(site):
            continue
        nprocs = api.first_arg(site, "nprocs", 2)
        if nprocs is None:
            continue
        name = ident(nprocs) if isinstance(nprocs, cst.Name) else None
        if _plain_attr(nprocs):
            name = model.code(nprocs)  # `args.nprocs = torch.cuda.device_count()` (a tutorial's launcher)
        if name is not None:
            values = [a.value for a in model.assigns if name in a.targets and a.func is site.func] or \
                     [a.value for a in model.assigns if name in a.targets]
            if len(values) != 1:
                continue
            nprocs = values[0]
        if not _is_count(nprocs) or _checked(site.func.node, model.module, name):
            continue
        out.add(model, site.node, RULE, "nprocs is torch.cuda.device_count(): on a machine without GPUs this starts "
                                        "0 workers and exits 0 having trained nothing; fall back to CPU workers "
                                        "or fail loudly")


VALID = [
    "import torch\nimport torch.multiprocessing as mp\nn = torch.cuda.device_count()\n"
    "assert n >= 2, 'needs 2 GPUs'\nmp.spawn(worker, nprocs=n)\n",
    "import torch\nimport torch.multiprocessing as mp\nmp.spawn(worker, nprocs=max(1, torch.cuda.device_count()))\n",
    "import torch\nimport torch.multiprocessing as mp\n\ndef main(args):\n    args.nprocs = torch.cuda.device_count()\n"
    "    if args.nprocs < 1:\n        raise SystemExit('no GPU')\n    mp.spawn(worker, nprocs=args.nprocs)\n",
]

INVALID = [
    ("import torch\nimport torch.multiprocessing as mp\n\ndef main():\n    world = torch.cuda.device_count()\n"
     "    mp.spawn(worker, args=(world,), nprocs=world, join=True)\n", 6),
    # the count kept in an attribute of the arguments (a tutorial's multiprocessing_distributed.py shape)
    ("import torch\nimport torch.multiprocessing as mp\n\ndef main(args):\n"
     "    args.nprocs = torch.cuda.device_count()\n    mp.spawn(worker, nprocs=args.nprocs, args=(args.nprocs, args))\n", 6),
    # a warning when there is no GPU is no fallback: still 0 workers
    ("import warnings\nimport torch\nimport torch.multiprocessing as mp\n\ndef main():\n"
     "    if not torch.cuda.is_available():\n        warnings.warn('CPU training is not allowed.')\n"
     "    n_gpus = torch.cuda.device_count()\n    mp.spawn(run, nprocs=n_gpus, args=(n_gpus,))\n", 9),
]
