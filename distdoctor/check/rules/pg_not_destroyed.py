"""DD502: `init_process_group` with no `destroy_process_group` anywhere in the repository.

At exit torch warns that the process group was not destroyed, and NCCL's teardown can abort or hang
while other ranks are still communicating. Call `dist.destroy_process_group()` at the end of training.
"""

from __future__ import annotations

from distdoctor.check.base import FileResult, RuleInfo

RULE = RuleInfo("DD502", "process_group_not_destroyed", "process group never destroyed", "warning")


def check(model, out: FileResult) -> None:
    if any(s.ident == "destroy_process_group" for s in model.sites):
        out.marks.add("destroy_process_group")
    for site in model.sites:
        if site.ident == "init_process_group" and site.name.startswith(("torch.distributed", "dist.")):
            out.add_pending(model, site.node, RULE, "the process group is never destroyed in this repository: call "
                                                    "dist.destroy_process_group() when training ends",
                            unless={"destroy_process_group"})


VALID = [
    "import torch.distributed as dist\ndist.init_process_group('gloo')\ntrain()\ndist.destroy_process_group()\n",
]

INVALID = [
    ("import torch.distributed as dist\n\ndef main():\n    dist.init_process_group('gloo')\n    train()\n", 4),
]
