"""What the rules know about PyTorch's distributed API: which calls are collectives, which wrap a model,
which files are distributed programs. Shared by the rules so each idiom is recognised in one place."""

from __future__ import annotations

import libcst as cst

from distdoctor.check.model import FileModel, Site, ident

COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor", "_all_gather_base", "reduce",
    "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "broadcast", "broadcast_object_list",
    "barrier", "monitored_barrier", "scatter", "scatter_object_list", "gather", "gather_object", "all_to_all",
    "all_to_all_single", "new_group", "new_subgroups", "all_reduce_coalesced", "all_gather_coalesced"})
# names that are collectives whatever object they are called on (generic ones like `gather` need torch.distributed)
COLLECTIVE_METHODS = frozenset({"all_reduce", "all_gather", "all_gather_object", "reduce_scatter", "barrier",
                                "broadcast_object_list", "all_to_all", "gather_object", "wait_for_everyone",
                                "all_gather_into_tensor", "reduce_scatter_tensor", "monitored_barrier"})
ACCELERATOR_COLLECTIVES = frozenset({"gather", "gather_for_metrics", "reduce", "broadcast", "pad_across_processes"})
DCP = frozenset({"save", "load", "async_save", "save_state_dict", "load_state_dict"})
FULL_STATE = frozenset({"get_model_state_dict", "get_optimizer_state_dict", "get_state_dict",
                        "set_model_state_dict", "set_optimizer_state_dict", "set_state_dict",
                        "full_optim_state_dict", "optim_state_dict", "summon_full_params",
                        "sharded_optim_state_dict", "scatter_full_optim_state_dict"})
DDP_WRAPPERS = frozenset({"DistributedDataParallel", "DDP"})
SHARDED_WRAPPERS = frozenset({"FullyShardedDataParallel", "FSDP", "fully_shard"})
DISTRIBUTED_MARKERS = ("torch.distributed", "init_process_group", "DistributedDataParallel", "LOCAL_RANK",
                       "get_rank(", "FullyShardedDataParallel", "fully_shard", "DistributedSampler", "is_main_process")
DISTRIBUTED_IMPORTS = ("torch.distributed", "accelerate", "deepspeed", "lightning", "pytorch_lightning",
                       "torch.nn.parallel")
SAVE_IDENTS = frozenset({"save", "save_pretrained", "save_to_disk", "save_file"})


def is_distributed(model: FileModel) -> bool:
    """The file takes part in a multi-process program (it uses torch.distributed or a launcher's variables)."""
    return model.mentions(*DISTRIBUTED_MARKERS) or any(
        v.startswith(DISTRIBUTED_IMPORTS) for v in model.imports.values())


class Wrapped:
    """The names of one file bound to DDP-, FSDP- or DeepSpeed-wrapped models."""

    def __init__(self, model: FileModel) -> None:
        self.ddp = model.wrapped_names(DDP_WRAPPERS)
        self.sharded = model.wrapped_names(SHARDED_WRAPPERS) | _deepspeed_engines(model)


def _deepspeed_engines(model: FileModel) -> set[str]:
    out = set()
    for a in model.assigns:
        if isinstance(a.value, cst.Call) and model.dotted(a.value.func).endswith("deepspeed.initialize") and a.targets:
            out.add(a.targets[0][5:] if a.targets[0].startswith("self.") else a.targets[0])
    return out


def receiver(site: Site) -> str:
    """`model` for `model(...)`, `self.model(...)` and `model.generate(...)`; '' otherwise."""
    func = site.node.func
    if isinstance(func, cst.Attribute):
        inner = func.value
        if isinstance(func.value, cst.Attribute) and isinstance(func.value.value, cst.Name) and \
                func.value.value.value == "self":
            return func.value.attr.value
        if isinstance(inner, cst.Name):
            return inner.value
        return ""
    if isinstance(func, cst.Name):
        return func.value
    return ""


def called_object(site: Site) -> str | None:
    """The wrapped-model name a call invokes directly (`model(x)`, `self.model(x)`), else None."""
    func = site.node.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return func.attr.value
    return None


def collective(site: Site, wrapped: Wrapped | None = None) -> str | None:
    """What collective a call is (`dist.all_reduce`, `DDP forward of model`, `dcp.save`), or None."""
    name, last = site.name, site.ident
    if name.startswith("torch.distributed.checkpoint.") and last in DCP:
        return f"torch.distributed.checkpoint.{last}"
    if last in FULL_STATE and (name.startswith("torch.distributed") or "FSDP" in name
                               or "FullyShardedDataParallel" in name):
        return f"{last} (gathers the full state on every rank)"
    if name.startswith("torch.distributed.") and last in COLLECTIVES:
        return f"dist.{last}"
    if name.startswith(("dist.", "torch.distributed")) and last in COLLECTIVES:
        return f"dist.{last}"
    if last in COLLECTIVE_METHODS and isinstance(site.node.func, cst.Attribute) and not name.startswith(
            ("torch.ops", "numpy", "np.", "threading")):
        return f"{name.rsplit('.', 2)[-2] if '.' in name else ''}.{last}".lstrip(".")
    if last in ACCELERATOR_COLLECTIVES and receiver(site).lower() in ("accelerator", "fabric", "self.accelerator"):
        return f"accelerator.{last}"
    if wrapped is None:
        return None
    obj = called_object(site)
    if obj in wrapped.sharded:
        return f"FSDP/ZeRO forward of {obj} (all-gathers parameters)"
    if obj in wrapped.ddp and not site.no_grad and not site.func.no_grad:
        return f"DDP forward of {obj}"
    rec = receiver(site)
    if rec in wrapped.sharded and last in ("generate", "state_dict", "save_checkpoint", "optim_state_dict"):
        return f"{rec}.{last}() of a sharded model (a collective)"
    return None


def mentions_rank(model: FileModel, node: cst.CSTNode) -> bool:
    """node uses a rank value anywhere (`f"ckpt_{rank}.pt"`, `seed + rank`)."""
    from distdoctor.patching.cstutil import walk

    return any(model.is_rank_value(n) or model.is_main_flag(n) for n in walk(node)
               if isinstance(n, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)))


def values_of(model: FileModel, site: Site, expr: cst.CSTNode) -> list[cst.CSTNode]:
    """expr and, for the names in it, what they were assigned in the same function (up to three steps)."""
    from distdoctor.patching.cstutil import walk

    out, todo = [], [expr]
    for _ in range(3):
        nxt = []
        for v in todo:
            out.append(v)
            for n in walk(v):
                if isinstance(n, cst.Name):
                    nxt += [a.value for a in model.assigns if n.value in a.targets and a.func is site.func]
        todo = nxt
    return out


def guarded(site: Site) -> bool:
    """Runs on some ranks only, or after the main process went first."""
    return site.guard is not None or site.main_first


def barrier_before(model: FileModel, site: Site) -> bool:
    """The main process went first in this function: a barrier the other ranks wait at before this call
    (`if rank != 0: barrier()`), or the same call made on the main process earlier (then a barrier)."""
    for s in model.sites:
        if s.func is not site.func or not s.stmt_index < site.stmt_index or s.guard is None:
            continue
        if s.ident in ("barrier", "wait_for_everyone", "monitored_barrier") and s.guard.polarity != "main":
            return True
        if s.ident == site.ident and s.guard.polarity == "main":
            return True
    return False


def first_arg(site: Site, name: str, pos: int) -> cst.BaseExpression | None:
    from distdoctor.patching.cstutil import get_arg

    a = get_arg(site.node, name, pos)
    return a.value if a is not None else None


__all__ = ["collective", "is_distributed", "Wrapped", "mentions_rank", "guarded", "barrier_before", "ident",
           "receiver", "called_object", "first_arg"]
