"""DD401: the device is chosen by the global rank (`set_device(rank)`, `.to(rank)`, `device_ids=[rank]`).

On the second node and later the global rank is past the node's GPU count (`invalid device ordinal`) or
several ranks share one GPU. The detection is the `local_rank_device` patch's own (its screen and its
libcst analysis, run without writing): `python scripts/patch_backend.py REPO --only local_rank_device` fixes it.
"""

from __future__ import annotations

from distdoctor.check.base import FileResult, RuleInfo

RULE = RuleInfo("DD401", "local_rank_device", "device chosen by the global rank instead of LOCAL_RANK")


def check(model, out: FileResult) -> None:
    from distdoctor import paths
    from distdoctor.patching.engine import PatchFailure, patch_source

    patch = paths.patch_registry().get("local_rank_device")
    if not any(s in model.source for s in patch.PATCH.prefilter):
        return
    try:
        result = patch_source(model.source, [patch], path=model.path)
    except PatchFailure:
        return
    lines = {}
    for change in result.changes:
        lines.setdefault(change.line, change.what)
    for line, what in sorted(lines.items()):
        out.findings.append(out_finding(out.path, line, what))


def out_finding(path: str, line: int, what: str):
    from distdoctor.check.base import Finding

    return Finding(path, line, 1, RULE.code, RULE.cause,
                   f"device chosen by the global rank ({what}); on node 2 and later that index is past the node's "
                   f"GPUs: use LOCAL_RANK (patch: local_rank_device)", RULE.severity)


VALID = [
    "import os\nimport torch\nlocal_rank = int(os.environ['LOCAL_RANK'])\ntorch.cuda.set_device(local_rank)\n",
]

INVALID = [
    ("import os\nimport torch\nrank = int(os.environ['RANK'])\ntorch.cuda.set_device(rank)\n", 4),
]
