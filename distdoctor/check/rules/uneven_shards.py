"""DD202: data split by hand per rank (`items[rank::world_size]`, `array_split(x, world)[rank]`) into shards of
unequal length.

When the length is not a multiple of the world size, some ranks get one batch more; they wait in a
collective (the backward's all-reduce) the others never enter, at the end of every epoch. Drop the
remainder (`items[: len(items) // world * world]`) or use DistributedSampler(drop_last=True).
"""

from __future__ import annotations

import libcst as cst

from distdoctor.check.base import FileResult, RuleInfo
from distdoctor.check.model import ident

RULE = RuleInfo("DD202", "dataloader_uneven", "hand-made per-rank shards of unequal length", "warning")

SPLITS = frozenset({"array_split", "tensor_split", "chunk", "split_list", "chunkify"})


def _world(model, node) -> bool:
    name = (ident(node.func) if isinstance(node, cst.Call) else ident(node)) or ""
    low = name.lower()
    return "world" in low or low in ("num_replicas", "nprocs", "num_processes", "ws", "n_ranks", "num_ranks",
                                     "ddp_world_size", "get_world_size", "num_gpus", "ngpus")


DATA = ("data", "file", "sample", "item", "indice", "index", "line", "path", "shard", "example", "prompt", "batch",
        "record", "doc", "url", "image", "text", "token", "dataset", "list")


def _data(node) -> bool:
    """The split thing is a list of work items (files, samples, prompts), not a weight or activation."""
    name = (ident(node) or "").lower()
    return any(w in name for w in DATA) and "weight" not in name and "bias" not in name


def _values(model, node) -> list[cst.BaseExpression]:
    """Every value assigned to the plain name node in the file (none for anything else)."""
    if not isinstance(node, cst.Name):
        return []
    return [a.value for a in model.assigns if a.targets == (node.value,)]


def _world_multiple(model, node, depth: int = 0) -> bool:
    """`k * world_size` (either side), or a name every assignment of which is one (edm's `num_batches`)."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        return _world(model, node.left) or _world(model, node.right)
    values = _values(model, node) if depth < 2 else []
    return bool(values) and all(_world_multiple(model, v, depth + 1) for v in values)


def _world_multiple_pieces(model, node) -> bool:
    """A name bound only to a split into a multiple of the world size of pieces (`x.tensor_split(k * world)`,
    `np.array_split(x, n)` with such an n): the step slice gives every rank the same number of pieces."""
    values = _values(model, node)
    return bool(values) and all(
        isinstance(v, cst.Call) and ident(v.func) in SPLITS
        and any(_world_multiple(model, a.value) for a in v.args[:2] if a.keyword is None) for v in values)


def check(model, out: FileResult) -> None:
    if "rank" not in model.source.lower():
        return
    for node in model.subscripts:
        if len(node.slice) != 1:
            continue
        part = node.slice[0].slice
        if isinstance(part, cst.Slice) and part.lower is not None and part.step is not None and part.upper is None:
            trimmed = isinstance(node.value, cst.Subscript) and isinstance(node.value.slice[0].slice, cst.Slice)
            if model.is_rank_value(part.lower) and _world(model, part.step) and not trimmed and _data(node.value) \
                    and not _world_multiple_pieces(model, node.value):
                out.add(model, node, RULE, f"{model.code(node)} gives the first len % world_size ranks one item "
                                           f"more: they run an extra step whose collectives the others never join; "
                                           f"trim to a multiple of the world size")
        elif isinstance(part, cst.Index) and model.is_rank_value(part.value) and isinstance(node.value, cst.Call) \
                and ident(node.value.func) in SPLITS and len(node.value.args) >= 2 \
                and _world(model, node.value.args[1].value) and _data(node.value.args[0].value):
            out.add(model, node, RULE, f"{model.code(node)}: {ident(node.value.func)} makes pieces of unequal size "
                                       f"when the length is not a multiple of the world size; ranks then run "
                                       f"different numbers of steps")


VALID = [
    "import torch.distributed as dist\nrank, world = dist.get_rank(), dist.get_world_size()\n"
    "n = len(items) // world * world\nshard = items[:n][rank::world]\n",
    "shard = items[rank * per_rank:(rank + 1) * per_rank]\n",
    # a number of pieces rounded up to a multiple of the world size: each rank gets as many (edm's fid.py)
    "import torch\nimport torch.distributed as dist\nworld = dist.get_world_size()\n"
    "num_batches = ((n - 1) // (size * world) + 1) * world\n"
    "all_batches = torch.arange(n).tensor_split(num_batches)\nmine = all_batches[dist.get_rank()::world]\n",
]

INVALID = [
    ("import torch.distributed as dist\nrank = dist.get_rank()\nshard = files[rank::dist.get_world_size()]\n", 3),
    ("import numpy as np\nparts = np.array_split(data, world_size)[local_rank]\n", 2),
    # a number of pieces that is not a multiple of the world size
    ("import torch\nimport torch.distributed as dist\nworld = dist.get_world_size()\nnum_batches = n // size + 1\n"
     "all_batches = torch.arange(n).tensor_split(num_batches)\nmine = all_batches[dist.get_rank()::world]\n", 6),
]
