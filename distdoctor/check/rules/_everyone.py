"""Shared test of the "every rank does it" rules (DD301-DD303): a call in a distributed file that runs on
every rank (no rank guard, no main-process-first block, not in a function called only under a guard)."""

from __future__ import annotations

from distdoctor.check import api


SPAWN = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})


def is_spawn(site) -> bool:
    """`mp.spawn(...)` / `torch.multiprocessing.start_processes(...)`: the caller starts the ranks."""
    return site.name in SPAWN or site.ident == "spawn" and site.name.startswith(("mp.", "multiprocessing"))


# what a program that runs several processes shows beyond its imports
_MULTI_PROCESS = ("torch.distributed", "torch.multiprocessing", "torch.nn.parallel.DistributedDataParallel",
                  "torch.nn.parallel.distributed", "torch.utils.data.distributed", "accelerate", "deepspeed",
                  "lightning", "pytorch_lightning", "horovod")
# (wrappers and samplers count by their calls above: a comment naming DistributedDataParallel is no use of it)
_MULTI_PROCESS_WORDS = ("init_process_group", "RANK", "get_rank(", "init_distributed", "is_main_process",
                        "world_size", "distributed_mode")


def on_every_rank(model, site) -> bool:
    return (api.is_distributed(model) and not api.guarded(site) and site.func.name != "<lambda>"
            and not _in_launcher(model, site) and not _data_parallel_only(model))


def _data_parallel_only(model) -> bool:
    """A one-process nn.DataParallel program that only imports torch.distributed (tutorial scripts copied
    from the ImageNet example): it wraps with DataParallel and calls nothing distributed."""
    return any(s.ident == "DataParallel" for s in model.sites) \
        and not any(s.name.startswith(_MULTI_PROCESS) for s in model.sites) \
        and not model.mentions(*_MULTI_PROCESS_WORDS)


def _in_launcher(model, site) -> bool:
    """The scope that calls mp.spawn runs once, in the parent process (SimCLR's `__main__`: makedirs, then
    spawn): only the spawned function runs per rank."""
    return any(other.func is site.func and is_spawn(other) for other in model.sites)


def report(model, out, rule, site, message: str) -> None:
    """Pending: dropped when every call of the enclosing function is rank-guarded."""
    func = site.func.key if site.func.name != "<module>" else None
    out.add_pending(model, site.node, rule, message, unless=set(), func=func)
