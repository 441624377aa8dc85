"""DD201: a shuffling DistributedSampler iterated over epochs with no `set_epoch` call anywhere in the repository.

The sampler seeds its shuffle with seed + epoch; without `sampler.set_epoch(epoch)` every epoch sees the
same order on every rank. Nothing fails: the model just trains on a fixed order.
"""

from __future__ import annotations

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo

RULE = RuleInfo("DD201", "sampler_set_epoch_missing",
                "DistributedSampler iterated over epochs without set_epoch", "warning")


def check(model, out: FileResult) -> None:
    if any(s.ident == "set_epoch" for s in model.sites):
        out.marks.add("set_epoch")
    if any("epoch" in target.lower() for _, _, target in model.loops):
        out.marks.add("epoch_loop")
    for site in model.calls("DistributedSampler"):
        shuffle = api.first_arg(site, "shuffle", 3)
        if shuffle is not None and model.code(shuffle) == "False":
            continue
        out.add_pending(model, site.node, RULE, "DistributedSampler shuffles with seed + epoch, and nothing in this "
                                               "repository calls sampler.set_epoch(epoch): every epoch repeats the "
                                               "same order", unless={"set_epoch"}, when={"epoch_loop"})


VALID = [
    "from torch.utils.data.distributed import DistributedSampler\nsampler = DistributedSampler(ds)\n"
    "for epoch in range(10):\n    sampler.set_epoch(epoch)\n    for b in DataLoader(ds, sampler=sampler):\n"
    "        step(b)\n",
    # no shuffling: no epoch to set
    "from torch.utils.data.distributed import DistributedSampler\nsampler = DistributedSampler(ds, shuffle=False)\n"
    "for epoch in range(10):\n    for b in DataLoader(ds, sampler=sampler):\n        step(b)\n",
]

INVALID = [
    ("from torch.utils.data.distributed import DistributedSampler\nsampler = DistributedSampler(ds)\n"
     "loader = DataLoader(ds, sampler=sampler)\nfor epoch in range(10):\n    for b in loader:\n        step(b)\n", 2),
]
