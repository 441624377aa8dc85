"""DD101: a collective, barrier, DDP/FSDP forward, full state dict or dcp save reached on some ranks only.

Found directly (`if rank == 0: dist.all_reduce(x)`) and through calls to functions of the same repository
(`if master_process: evaluate()` where evaluate() all-reduces). The other ranks never join: the job hangs
until the process-group timeout. The balanced main-process-first pattern (`if rank != 0: barrier()` ...
`if rank == 0: barrier()`), DDP forward under no_grad, `model.module(...)` and collectives with an
explicit `group=` under a membership test are not reported.
"""

from __future__ import annotations

from distdoctor.check import api
from distdoctor.check.base import FileResult, Finding, RuleInfo
from distdoctor.check.model import EXTERNAL

RULE = RuleInfo("DD101", "rank_conditional_collective",
                "collective, barrier, DDP/FSDP forward or checkpoint save reached on some ranks only")

_OPPOSITE = {"main": "others", "others": "main"}


def _balanced(model, site, what_by_site) -> bool:
    """The same collective also runs under the opposite guard in this function (main-process-first)."""
    want = _OPPOSITE.get(site.guard.polarity)
    for other, what in what_by_site.items():
        if other is site or other.func is not site.func or other.ident != site.ident:
            continue
        if other.guard is not None and (other.guard.polarity == want or site.guard.polarity == "some"
                                        and other.guard.polarity == "some" and other.guard.text != site.guard.text):
            return True
    return False


def _covered(site, key: str, guarded) -> bool:
    """The same function is also called from the other side of this guard (`if rank == 0: f(a)` / `else: f(b)`,
    or rank 0 and the other ranks in turn): every rank calls it."""
    want = _OPPOSITE.get(site.guard.polarity)
    for other, other_key in guarded:
        if other is site or other_key != key or other.func is not site.func:
            continue
        if other.guard.polarity == want or (other.guard.node is not None and other.guard.node is site.guard.node
                                            and other.guard.text != site.guard.text):
            return True
    return False


def check(model, out: FileResult) -> None:
    wrapped = api.Wrapped(model)
    what_by_site = {}
    for site in model.sites:
        what = api.collective(site, wrapped)
        if what is not None:
            what_by_site[site] = what
    direct: dict[str, list] = {}
    for site, what in what_by_site.items():
        if site.guard is None or site.guard.polarity == "solo":
            direct.setdefault(site.func.key, []).append(what)
            continue
        if site.guard.polarity in ("data", "group"):
            continue  # a per-rank value, or a parallel group's rank (its collectives run on that group)
        if site.guard.polarity == "some" and api.first_arg(site, "group", 99) is not None:
            continue  # a subgroup collective under a membership test
        if _balanced(model, site, what_by_site):
            continue
        out.add(model, site.node, RULE, f"{what} runs on some ranks only ({_where(model, site.guard)}); the other "
                                        f"ranks never join it and the job hangs until the timeout")
    # facts for the repository-wide call graph
    calls, guarded_calls = {}, []
    # positions cost a pass over the whole file: keep the guarded calls that can reach this repository's
    # functions (defined here, or imported from a module that is not a known package)
    local = {f.key for f in model.functions[1:]} | {f"fn:{name}" for name, origin in model.imports.items()
                                                    if origin.split(".")[0] not in EXTERNAL}
    guarded = [(site, key) for site in model.sites if site not in what_by_site
               for key in [model.callee_key(site)] if key and site.guard is not None]
    for site in model.sites:
        key = model.callee_key(site)
        if site in what_by_site or not key:
            continue
        if site.guard is None or site.guard.polarity == "solo" or _covered(site, key, guarded):
            calls.setdefault(site.func.key, set()).add(key)
        elif site.guard.polarity not in ("data", "group") and key in local:
            line, col = model.pos(site.node)
            guarded_calls.append((key, line, col, _where(model, site.guard), site.func.key))
    defs = {}
    for func in model.functions[1:]:
        defs.setdefault(func.key, []).append(func.guard is not None)
    out.extra[RULE.code] = {"direct": direct, "calls": calls, "guarded": guarded_calls, "defs": defs}


def _where(model, guard) -> str:
    return f"{guard.text}, line {model.pos(guard.node)[0]}" if guard.node is not None else guard.text


def finish(results: list[FileResult]) -> list[Finding]:
    """Follow calls: a guarded call to a function of this repository that reaches a collective."""
    defs: dict[str, list[tuple[str, str | None]]] = {}  # name -> [(path, what it reaches or None)]
    facts = [(r, r.extra.get(RULE.code)) for r in results if r.extra.get(RULE.code)]
    reach: dict[tuple[str, str], str] = {}
    for r, f in facts:
        for name, sites in f["direct"].items():
            reach[(r.path, name)] = f"{sites[0]} (in {_short(r.path)})"
        for name, entries in f["defs"].items():
            for decorated in entries:
                defs.setdefault(name, []).append((r.path, "decorated" if decorated else None))
    changed = True
    while changed:
        changed = False
        for r, f in facts:
            for name, callees in f["calls"].items():
                if (r.path, name) in reach or name == "fn:<module>":
                    continue
                for callee in sorted(callees):
                    target = _reaches(callee, defs, reach)
                    if target:
                        reach[(r.path, name)] = f"{_bare(callee)}() -> {target}"
                        changed = True
                        break
    out = []
    for r, f in facts:
        for callee, line, col, where, _ in f["guarded"]:
            target = _reaches(callee, defs, reach)
            if target:
                out.append(Finding(r.path, line, col, RULE.code, RULE.cause,
                                   f"{_bare(callee)}() reaches {target} on some ranks only ({where}); the other ranks "
                                   f"never join it and the job hangs until the timeout", RULE.severity))
    return out


def _reaches(callee: str, defs, reach) -> str | None:
    """What a call to `callee` reaches when every definition of that name in the repository reaches a collective."""
    places = defs.get(callee)
    if not places or any(kind == "decorated" for _, kind in places):
        return None
    found = [reach.get((path, callee)) for path, _ in places]
    return found[0] if all(found) else None


def _bare(key: str) -> str:
    return key.split(":", 1)[-1]


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


VALID = [
    # every rank all-reduces; rank 0 prints
    "import torch.distributed as dist\n\ndef step(loss, rank):\n    dist.all_reduce(loss)\n"
    "    if rank == 0:\n        print(loss.item())\n",
    # balanced main-process-first pattern
    "import torch.distributed as dist\n\ndef prepare(rank):\n    if rank != 0:\n        dist.barrier()\n"
    "    build_cache()\n    if rank == 0:\n        dist.barrier()\n",
    # rank-0 work followed by a broadcast from 0 on every rank
    "import torch.distributed as dist\n\ndef load(rank, t):\n    if rank == 0:\n        t.copy_(read())\n"
    "    dist.broadcast(t, src=0)\n",
    # DDP forward under no_grad on rank 0, and model.module
    "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\nmodel = DDP(net)\n\n"
    "@torch.no_grad()\ndef sample():\n    return model(x)\n\nif rank == 0:\n    sample()\n"
    "    model.module.generate(x)\n",
    # `local_rank != -1` asks "are we distributed?": every rank takes the same branch
    "import torch.distributed as dist\nif args.local_rank != -1:\n    dist.barrier()\n",
    # torch.distributed.checkpoint on every rank
    "import torch.distributed.checkpoint as dcp\n\ndef save(state, rank):\n    dcp.save(state, checkpoint_id='ckpt')\n"
    "    if rank == 0:\n        print('saved')\n",
    # a method named like nn.Module.train is not the repository's train() (litgpt's generate_example)
    "import torch.distributed as dist\n\ndef train(fabric):\n    fabric.barrier()\n\n"
    "def generate_example(fabric, model):\n    model.train()\n\nif fabric.global_rank == 0:\n"
    "    generate_example(fabric, model)\n",
    # the single-process shortcut (DETR, DINO, nanochat): every rank of a distributed run takes the same side
    "import torch.distributed as dist\n\ndef reduce(t, world_size):\n    if world_size == 1:\n        return t\n"
    "    dist.all_reduce(t)\n    return t\n\ndef sync():\n    if not is_dist_avail_and_initialized():\n"
    "        return\n    dist.barrier()\n",
    # the same function called from both sides of the rank test (VITS's train_and_evaluate with rank 0's
    # writers or with None): every rank reaches its collective
    "import torch.distributed as dist\n\ndef step(model, x, writer):\n    dist.all_reduce(model(x))\n\n"
    "def main(rank, model, x):\n    if rank == 0:\n        step(model, x, make_writer())\n    else:\n"
    "        step(model, x, None)\n",
    # a subgroup collective under a membership test
    "import torch.distributed as dist\nif rank in ranks:\n    dist.all_reduce(t, group=g)\n",
    # under a parallel group's rank test the collective runs on that group (Megatron-style)
    "import torch.distributed as dist\nfrom megatron.core import parallel_state as ps\n\ndef sync(t):\n"
    "    if ps.get_tensor_model_parallel_rank() == 0:\n        dist.all_reduce(t, group=ps.get_data_parallel_group())\n",
]

INVALID = [
    ("import torch.distributed as dist\n\nrank = dist.get_rank()\nif rank == 0:\n    dist.all_reduce(loss)\n", 5),
    # through a call in the same file
    ("import torch.distributed as dist\n\ndef evaluate(model):\n    acc = model.score()\n"
     "    dist.all_reduce(acc)\n    return acc\n\ndef main(master_process):\n    if master_process:\n"
     "        evaluate(model)\n", 10),
    # DDP forward on rank 0 only
    ("from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(net)\n"
     "if dist.get_rank() == 0:\n    out = model(x)\n", 4),
    # FSDP full state dict gathered on rank 0 only
    ("from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\nmodel = FSDP(net)\n"
     "if dist.get_rank() == 0:\n    torch.save(model.state_dict(), 'full.pt')\n", 4),
    # a rank-zero-only function that saves a sharded checkpoint
    ("import torch.distributed.checkpoint as dcp\n\n@rank_zero_only\ndef save(state):\n"
     "    dcp.save(state, checkpoint_id='ckpt')\n", 5),
    # both sides call a function, but only rank 0's side reaches the collective (a different function)
    ("import torch.distributed as dist\n\ndef step(x):\n    dist.all_reduce(x)\n\ndef log(x):\n    print(x)\n\n"
     "def main(rank, x):\n    if rank == 0:\n        step(x)\n    else:\n        log(x)\n", 11),
    # the rest of the function after an early return on the other ranks
    ("import torch.distributed as dist\n\ndef log(rank, t):\n    if rank != 0:\n        return\n"
     "    dist.barrier()\n", 6),
]
