"""DD503: a per-rank random seed (`manual_seed(seed + rank)`) in a program that never makes the ranks' parameters
equal (no DDP / FSDP / DeepSpeed / Accelerate wrapper, no broadcast).

Each rank initialises different weights; gradients averaged by hand then train N different models that
never agree. Seed the model's initialisation identically, or broadcast the parameters from rank 0.
"""

from __future__ import annotations

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo

RULE = RuleInfo("DD503", "model_differs_across_ranks", "per-rank seed with no parameter broadcast", "warning")

SEEDERS = frozenset({"manual_seed", "manual_seed_all", "seed", "set_seed", "seed_everything"})
SYNCS = frozenset({"DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard", "initialize",
                   "prepare", "prepare_model", "broadcast", "broadcast_parameters", "_sync_module_states",
                   "_broadcast_coalesced", "sync_params", "setup", "setup_module", "replicate", "parallelize_module"})


def check(model, out: FileResult) -> None:
    if any(s.ident in SYNCS for s in model.sites) or "sync_module_states" in model.source:
        out.marks.add("params_synced")
    if any(s.ident in ("all_reduce", "init_process_group") for s in model.sites):
        out.marks.add("distributed")
    for site in model.sites:
        if site.ident in SEEDERS and site.node.args and api.mentions_rank(model, site.node.args[0].value):
            out.add_pending(model, site.node, RULE, f"{model.code(site.node)} seeds each rank differently and "
                                                    f"nothing in this repository broadcasts the parameters (no DDP/FSDP "
                                                    f"wrapper): the ranks start from different weights",
                            unless={"params_synced"}, when={"distributed"})


VALID = [
    "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
    "torch.manual_seed(1337 + rank)\nmodel = DDP(Net())\n",
    "import torch\nimport torch.distributed as dist\ntorch.manual_seed(0)\nmodel = Net()\n"
    "for p in model.parameters():\n    dist.all_reduce(p.grad)\n",
]

INVALID = [
    ("import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\nrank = dist.get_rank()\n"
     "torch.manual_seed(42 + rank)\nmodel = Net()\nfor p in model.parameters():\n    dist.all_reduce(p.grad)\n", 5),
]
