"""DD302: an experiment logger (wandb, TensorBoard, MLflow, Neptune, Comet, Aim) created on every rank.

Each rank opens its own run (N duplicate runs in the dashboard) or all ranks write one log directory;
with wandb the extra inits can also hang at start. Create the logger on the main process only.
"""

from __future__ import annotations

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.check.rules._everyone import on_every_rank, report

RULE = RuleInfo("DD302", "logger_init_all_ranks", "experiment logger created on every rank")

LOGGERS = {"wandb.init": "wandb.init", "mlflow.start_run": "mlflow.start_run", "neptune.init_run": "neptune.init_run",
           "neptune.init": "neptune.init", "comet_ml.Experiment": "comet_ml.Experiment", "aim.Run": "aim.Run",
           "swanlab.init": "swanlab.init"}
WRITERS = frozenset({"SummaryWriter"})


def check(model, out: FileResult) -> None:
    for site in model.sites:
        what = LOGGERS.get(site.name) or (site.ident if site.ident in WRITERS else None)
        if what is None or not on_every_rank(model, site):
            continue
        if any(api.mentions_rank(model, a.value) for a in site.node.args):
            continue  # mode="disabled" if rank else ..., log_dir per rank
        report(model, out, RULE, site, f"{what}(...) runs on every rank: one run or event file per rank; create "
                                       f"it on the main process only")


VALID = [
    "import wandb\nimport torch.distributed as dist\nif dist.get_rank() == 0:\n    wandb.init(project='p')\n",
    "import wandb\nimport torch.distributed as dist\nrank = dist.get_rank()\n"
    "wandb.init(project='p', mode='online' if rank == 0 else 'disabled')\n",
    "from torch.utils.tensorboard import SummaryWriter\nimport torch.distributed as dist\n"
    "writer = SummaryWriter('runs') if dist.get_rank() == 0 else None\n",
    # the logger class is built after an early return on the ranks that do not log (torchtitan)
    "from torch.utils.tensorboard import SummaryWriter\nimport torch.distributed as dist\n\nclass TB:\n"
    "    def __init__(self, d):\n        self.writer = SummaryWriter(d)\n\ndef build(metrics_rank):\n"
    "    should_log = dist.get_rank() == metrics_rank\n    if not should_log:\n        return None\n    return TB('runs')\n",
    # a flag holding a main-process test's answer (FoundationVision/VAR: with_tb_lg = dist.is_master())
    "from torch.utils.tensorboard import SummaryWriter\nimport torch.distributed as dist\n\ndef main():\n"
    "    dist.init_process_group('gloo')\n    with_tb_lg = dist.is_master()\n    if with_tb_lg:\n"
    "        writer = SummaryWriter('runs')\n",
    # a flag built from the ranks of the parallel dimensions (huggingface/picotron: is_wandb_rank)
    "import wandb\nimport torch.distributed as dist\n\ndef main(pgm):\n    dist.init_process_group('gloo')\n"
    "    is_wandb_rank = pgm.tp_rank == 0 and pgm.dp_rank == 0 and pgm.cp_rank == 0 and pgm.pp_is_last_stage\n"
    "    if is_wandb_rank:\n        wandb.init(project='p')\n",
]

INVALID = [
    ("import wandb\nimport torch.distributed as dist\ndist.init_process_group('nccl')\nwandb.init(project='p')\n", 4),
    ("from torch.utils.tensorboard import SummaryWriter\nimport torch.distributed as dist\n\ndef main():\n"
     "    dist.init_process_group('gloo')\n    writer = SummaryWriter('runs')\n", 6),
]
