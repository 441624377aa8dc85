"""DD402: `torch.load` without `map_location` in a distributed program.

A checkpoint saved from cuda:0 loads onto cuda:0 on every rank: all ranks allocate on GPU 0 (out of memory
there, or a silent device mix). Pass `map_location="cpu"` or the rank's own device.
"""

from __future__ import annotations

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.check.rules._everyone import report

RULE = RuleInfo("DD402", "torch_load_no_map_location", "torch.load without map_location in a distributed program",
                "warning")


CHECKPOINT_WORDS = ("ckpt", "checkpoint", "resume", "snapshot", "state_dict", "optim")
NOT_CHECKPOINT = ("meta", "json", "config", "args", "hparams", "feat", "data", "token", "vocab")


def check(model, out: FileResult) -> None:
    if not api.is_distributed(model):
        return
    for site in model.sites:
        if site.name != "torch.load" or api.first_arg(site, "map_location", 1) is not None:
            continue
        path = api.first_arg(site, "f", 0)
        if any(a.star for a in site.node.args) or path is None or api.guarded(site) or \
                api.first_arg(site, "mmap", 99) is not None:
            continue
        text = " ".join(model.code(v) for v in api.values_of(model, site, path)).lower()
        if not any(w in text for w in CHECKPOINT_WORDS) or any(w in text for w in NOT_CHECKPOINT):
            continue  # data, metadata or features: not known to hold tensors saved from a GPU
        report(model, out, RULE, site, "torch.load without map_location: tensors saved from cuda:0 load onto "
                                        "cuda:0 on every rank; pass map_location='cpu' or this rank's device")


VALID = [
    "import torch\nimport torch.distributed as dist\nstate = torch.load('ckpt.pt', map_location='cpu')\n",
    "import torch\nstate = torch.load('ckpt.pt')\n",  # not a distributed program
    # data prepared on the CPU, not a checkpoint
    "import torch\nimport torch.distributed as dist\ntrain_data = torch.load(data_dir / 'train.pt')\n",
]

INVALID = [
    ("import torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\nstate = torch.load('ckpt.pt')\n", 4),
]
