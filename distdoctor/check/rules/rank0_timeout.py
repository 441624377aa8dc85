"""DD103: long rank-0-only work (evaluation, validation) while the process group keeps its default timeout.

The other ranks go on to the next collective and wait there for rank 0; past the default timeout (10 min
for NCCL) the watchdog kills the job in the middle of a healthy evaluation. Pass a `timeout=` long enough
for the rank-0 work to `init_process_group`, or evaluate on every rank.
"""

from __future__ import annotations

import re

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo

RULE = RuleInfo("DD103", "collective_timeout",
                "long rank-0-only evaluation under the default process-group timeout", "warning")

LONG_WORK = re.compile(r"^(evaluate|evaluation|validate|validation|run_eval|run_validation|do_eval|eval_epoch|"
                       r"evaluate_model|run_evaluation|eval_model|test_epoch|run_test|validate_epoch|eval_loop)")


def check(model, out: FileResult) -> None:
    for site in model.sites:
        if site.name.endswith("init_process_group"):
            out.marks.add("custom_timeout" if api.first_arg(site, "timeout", 3) is not None else "default_timeout")
        if api.collective(site) is not None:
            out.marks.add("collectives")
    for site in model.sites:
        if site.guard is None or site.guard.polarity != "main" or not LONG_WORK.match(site.ident):
            continue
        out.add_pending(model, site.node, RULE,
                        f"{site.ident}() runs on rank 0 only ({site.guard.text}) while the other ranks wait in the "
                        f"next collective under the default timeout (10 min for NCCL); pass a longer timeout= to "
                        f"init_process_group or evaluate on every rank",
                        unless={"custom_timeout"}, when={"default_timeout"})


VALID = [
    "import datetime\nimport torch.distributed as dist\n"
    "dist.init_process_group('nccl', timeout=datetime.timedelta(hours=2))\nif dist.get_rank() == 0:\n    evaluate(model)\n",
    "import torch.distributed as dist\ndist.init_process_group('nccl')\nevaluate(model)\n",
]

INVALID = [
    ("import torch.distributed as dist\ndist.init_process_group('nccl')\nfor epoch in range(3):\n    train()\n"
     "    if dist.get_rank() == 0:\n        evaluate(model, val_loader)\n    dist.barrier()\n", 6),
]
