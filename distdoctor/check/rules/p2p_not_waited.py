"""DD501: `isend` / `irecv` / `batch_isend_irecv` whose work is never waited on.

The call returns at once; the buffer is read (irecv) before the data arrived, or changed or freed
(isend) while it is still being sent. Keep the work and call `.wait()` before touching the buffer.
"""

from __future__ import annotations

import libcst as cst

from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.patching.cstutil import walk

RULE = RuleInfo("DD501", "p2p_not_waited", "isend/irecv work never waited on")

P2P = frozenset({"isend", "irecv", "batch_isend_irecv"})


def check(model, out: FileResult) -> None:
    sites = [s for s in model.sites if s.ident in P2P and s.name.startswith(("torch.distributed", "dist."))]
    if not sites:
        return
    bound = {id(a.value): a for a in model.assigns}
    for site in sites:
        assign = bound.get(id(site.node))
        if assign is None:
            if id(site.node) in model.discarded:
                out.add(model, site.node, RULE, f"the work {site.ident}() returns is dropped: nothing waits for "
                                                f"the transfer; keep it and call .wait()")
            continue
        names = [t for t in assign.targets if "." not in t]
        scope = site.func.node if site.func.node is not None else model.module
        if names and not any(isinstance(n, cst.Name) and n.value in names and n is not _target(assign)
                             for n in walk(scope) if _used(n, assign)):
            out.add(model, site.node, RULE, f"{names[0]} = {site.ident}(...) is never used: nothing waits for the "
                                            f"transfer; call {names[0]}.wait()")


def _target(assign):
    node = assign.node
    return node.targets[0].target if isinstance(node, cst.Assign) else node.target


def _used(node, assign) -> bool:
    return not any(node is t for t in _names_in(assign.node))


def _names_in(node):
    targets = node.targets if isinstance(node, cst.Assign) else [node]
    for t in targets:
        yield from (n for n in walk(t.target) if isinstance(n, cst.Name))


VALID = [
    "import torch.distributed as dist\nreq = dist.isend(t, dst=1)\nreq.wait()\n",
    "import torch.distributed as dist\nreqs = dist.batch_isend_irecv(ops)\nfor r in reqs:\n    r.wait()\n",
    "import torch.distributed as dist\n\ndef send(t):\n    return dist.isend(t, dst=1)\n",
]

INVALID = [
    ("import torch.distributed as dist\ndist.irecv(buf, src=0)\nprint(buf)\n", 2),
    ("import torch.distributed as dist\n\ndef send(t):\n    req = dist.isend(t, dst=1)\n    t.zero_()\n", 4),
]
