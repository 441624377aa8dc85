"""What a patch needs to see before the diagnosis proposes it.

A patch fixes one mechanism of a cause, not every way the cause shows: `local_rank_device` rebinds a device
chosen by the global rank, which does nothing for more processes than GPUs on a node; `gloo_future_shim`
gives `get_future()` to gloo's work handles, which adds no collective gloo lacks. Each precondition is a
regex looked for on the log's candidate lines and in the person's description; without a match the cause
stands, but its patch is withheld with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Precondition:
    patch: str
    regex: re.Pattern[str]
    anchors: tuple[str, ...]   # literals one of which a matching line contains (prefilter words)
    shows: str                 # what a match shows
    missing: str               # why the patch is withheld without a match, and what to do instead


_RANK = r"(?:(?:args|self|opt|cfg|config|params)\.)?(?:global_)?rank\b"
PRECONDITIONS = {p.patch: p for p in [
    Precondition(
        "local_rank_device",
        re.compile(rf"set_device\(\s*(?:{_RANK}|(?:dist|torch\.distributed)\.get_rank\(\)|int\(os\.environ\[[\"']RANK)"
                   rf"|cuda:\{{{_RANK}\}}|\.(?:to|cuda)\(\s*{_RANK}\s*\)|device_ids=\[\s*{_RANK}\s*\]"
                   r"|device\(\s*[\"']cuda[\"']\s*,\s*" + _RANK + r"|SLURM_PROCID"),
        ("set_device(", "cuda:{", ".to(", ".cuda(", "device_ids=[", "device(", "SLURM_PROCID"),
        "the code binds its device by the global rank",
        "nothing in the log or the description shows a device bound by the global rank (the patch rebinds "
        "RANK to LOCAL_RANK); if more processes were started on a node than it has GPUs, start fewer "
        "(--nproc_per_node = the node's GPU count, CUDA_VISIBLE_DEVICES) instead"),
    Precondition(
        "gloo_future_shim",
        re.compile(r"get_future\(|getFuture"),
        ("get_future(", "getFuture"),
        "the code calls get_future() on a collective's work handle",
        "the log shows no get_future()/Work::getFuture call (the shim only adds get_future to gloo's work "
        "handles); a collective or dtype gloo lacks needs another backend or a different call"),
]}


def anchors() -> set[str]:
    return {a for p in PRECONDITIONS.values() for a in p.anchors}


def met_in(text: str) -> set[str]:
    """The patches whose precondition one line (or a description) shows."""
    return {p.patch for p in PRECONDITIONS.values() if any(a in text for a in p.anchors) and p.regex.search(text)}
