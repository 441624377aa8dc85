"""DD503: a per-rank random seed (`manual_seed(seed + rank)`) in a program that never makes the ranks' parameters
equal (no DDP / FSDP / DeepSpeed / Accelerate wrapper, no broadcast).

Each rank initialises different weights; gradients averaged by hand then train N different models that
never agree. Seed the model's initialisation identically, or broadcast the parameters from rank 0.
"""

from __future__ import annotations

import libcst as cst

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.patching.cstutil import walk

RULE = RuleInfo("DD503", "model_differs_across_ranks", "per-rank seed with no parameter broadcast", "warning")

SEEDERS = frozenset({"manual_seed", "manual_seed_all", "seed", "set_seed", "seed_everything"})
SYNCS = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard", "initialize",
                   "prepare", "prepare_model", "broadcast", "broadcast_parameters", "_sync_module_states",
                   "_broadcast_coalesced", "sync_params", "setup", "setup_module", "replicate", "parallelize_module"})


_UNDO = {cst.Subtract: cst.AddAssign, cst.Add: cst.SubtractAssign}


def _offset_undone(model, site, value) -> bool:
    """`manual_seed(args.seed - local_rank)` after `args.seed += local_rank` in the same function (cleanrl's
    multi-GPU PPO: per-rank seeds for the environments, the base seed for torch): the rank offset cancels."""
    undo = _UNDO.get(type(value.operator)) if isinstance(value, cst.BinaryOperation) else None
    if undo is None or api.mentions_rank(model, value.left):
        return False
    base, offset = model.code(value.left), model.code(value.right)
    scope = site.func.node if site.func.node is not None else model.module
    return any(isinstance(n, cst.AugAssign) and isinstance(n.operator, undo) and model.code(n.target) == base
               and model.code(n.value) == offset for n in walk(scope))


def check(model, out: FileResult) -> None:
    if any(s.ident in SYNCS for s in model.sites) or "sync_module_states" in model.source:
        out.marks.add("params_synced")
    if any(s.ident in ("all_reduce", "init_process_group") for s in model.sites):
        out.marks.add("distributed")
    for site in model.sites:
        if site.ident in SEEDERS and site.node.args and api.mentions_rank(model, site.node.args[0].value) \
                and not _offset_undone(model, site, site.node.args[0].value):
            out.add_pending(model, site.node, RULE, f"{model.code(site.node)} seeds each rank differently and "
                                                    f"nothing in this repository broadcasts the parameters (no DDP/FSDP "
                                                    f"wrapper): the ranks start from different weights",
                            unless={"params_synced"}, when={"distributed"})


VALID = [
    "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
    "torch.manual_seed(1337 + rank)\nmodel = DDP(Net())\n",
    "import torch\nimport torch.distributed as dist\ntorch.manual_seed(0)\nmodel = Net()\n"
    "for p in model.parameters():\n    dist.all_reduce(p.grad)\n",
    # the per-rank offset is added for the environments and taken off again for torch: the same weights
    "import random\nimport torch\nimport torch.distributed as dist\n\ndef main(args, local_rank):\n"
    "    dist.init_process_group('gloo')\n    args.seed += local_rank\n    random.seed(args.seed)\n"
    "    torch.manual_seed(args.seed - local_rank)\n    model = Net()\n    for p in model.parameters():\n"
    "        dist.all_reduce(p.grad)\n",
]

INVALID = [
    ("import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\nrank = dist.get_rank()\n"
     "torch.manual_seed(42 + rank)\nmodel = Net()\nfor p in model.parameters():\n    dist.all_reduce(p.grad)\n", 5),
    # the offset is taken off a different base than the one it was added to
    ("import torch\nimport torch.distributed as dist\n\ndef main(args, seed, local_rank):\n"
     "    dist.init_process_group('gloo')\n    args.seed += local_rank\n    torch.manual_seed(seed - local_rank)\n"
     "    model = Net()\n    for p in model.parameters():\n        dist.all_reduce(p.grad)\n", 7),
]
