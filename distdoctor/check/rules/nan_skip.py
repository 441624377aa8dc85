"""DD102: a step skipped on a per-rank value (NaN/inf local loss) before a collective or DDP backward.

`if torch.isnan(loss): continue` on the local loss is taken by the ranks whose batch gave NaN only; they
skip the backward's all-reduce (or the explicit collective) the other ranks wait in, and the next
collective pairs with the wrong one. Reduce the flag first (all_reduce it) so that every rank decides the same.
Early exits on a rank test are DD101 (reported at the collective they skip).
"""

from __future__ import annotations

from distdoctor.check import api
from distdoctor.check.base import FileResult, RuleInfo

RULE = RuleInfo("DD102", "rank_conditional_collective",
                "a step skipped on a per-rank value (NaN loss) before a collective or DDP backward")


def _after(site_index: tuple[int, ...], exit_index: tuple[int, ...]) -> bool:
    return site_index > exit_index and site_index[: len(exit_index)] != exit_index


def _within(site_index, loop_prefix) -> bool:
    return site_index[: len(loop_prefix)] == loop_prefix


def check(model, out: FileResult) -> None:
    exits = [e for e in model.exits if e.guard.polarity == "data"]
    if not exits:
        return
    wrapped = api.Wrapped(model)
    has_wrapper = bool(wrapped.ddp or wrapped.sharded)
    for e in exits:
        # the statements the exit skips: the rest of the loop body (continue/break) or function (return)
        prefix = e.loop_index if e.what != "return" else ()
        skipped, before = None, False
        for site in model.sites:
            if site.func is not e.func or (prefix and not _within(site.stmt_index, prefix)):
                continue
            what = api.collective(site, wrapped) or (
                "DDP backward (all-reduces gradients)" if has_wrapper and site.ident == "backward" else None)
            if what is None:
                continue
            if site.stmt_index < e.stmt_index:
                before = before or what.startswith(("dist.", "accelerator.", ".all_reduce"))
            elif _after(site.stmt_index, e.stmt_index) and skipped is None:
                skipped = (what, model.pos(site.node)[0])
        if skipped and not before:
            out.add(model, e.node, RULE, f"{e.guard.text} is decided per rank: the ranks that take it skip "
                                         f"{skipped[0]} (line {skipped[1]}) and the others wait in it; "
                                         f"all_reduce the flag first")


VALID = [
    # the flag is reduced first: every rank decides the same
    "import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
    "model = DDP(net)\nfor batch in loader:\n    loss = model(batch)\n    bad = torch.isnan(loss).float()\n"
    "    dist.all_reduce(bad)\n    if bad.item() > 0:\n        continue\n    loss.backward()\n",
    # a NaN check that only logs
    "import math\nfor batch in loader:\n    loss = step(batch)\n    if math.isnan(loss):\n        print('nan')\n",
]

INVALID = [
    ("import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(net)\n"
     "for batch in loader:\n    loss = model(batch)\n    if torch.isnan(loss):\n        continue\n"
     "    loss.backward()\n    opt.step()\n", 6),
    ("import math\nimport torch.distributed as dist\n\ndef train(loader):\n    for batch in loader:\n"
     "        loss = step(batch)\n        if not math.isfinite(loss.item()):\n            continue\n"
     "        dist.all_reduce(loss)\n", 7),
]
