"""Environment reports pasted beside a log: `python -m torch.utils.collect_env` (the PyTorch issue template asks
for it), `transformers-cli env`, `accelerate env`, DeepSpeed's `ds_report`, a `pip list` / `pip freeze`. They state
the set-up (versions, CPU flags, GPUs), not the failure: their words ("CUDA", "driver", "NCCL", "version") would
make retrieval see a driver or CUDA failure in any log they sit beside. Retrieval's query leaves their lines out;
the signatures and the facts readers (distdoctor/diagnose/versions.py) still read them.

A report is a block: it starts at a report's own header line and goes on while lines have a report's shape
(`key: value`, `key ....... value`, `[pip3] name==version`, `- key: value`, lscpu's columns, blank lines); the first
other line (a traceback, an exception, a rank-prefixed line) ends it.
"""

from __future__ import annotations

import re

# The first line of each report (the tools' own text: torch 2.13's collect_env, transformers' and accelerate's
# `env` commands, DeepSpeed's ds_report).
_START = re.compile(
    r"^\s*(?:Collecting environment information\.*"
    r"|PyTorch version: \S"
    r"|Copy-and-paste the text below in your GitHub issue"
    r"|- `?(?:transformers|Accelerate|accelerate)`? version: \S"
    r"|DeepSpeed C\+\+/CUDA extension op report"
    r"|DeepSpeed general environment info:"
    r"|Package\s+Version\s*$)")
# A line of a report: "Key: value" / "- Key: value" / "Key ..... value" / "[pip3] x==1" / "name==1.2" / "name   1.2" /
# a rule of dashes. Not an exception, warning or log level line, which ends a report.
_ROW = re.compile(
    r"^\s*(?:[-*]\s+)?`?[A-Za-z][\w .,()/?`'+#-]{0,60}?`?\s*(?::|\.{3,})(?:\s+\S.*|\s*)$"
    r"|^\s*\[(?:pip3?|conda)\] "
    r"|^\s*[A-Za-z0-9][\w.-]*(?:==|\s{2,})[\w.+!-]+(?:\s.*)?$"
    r"|^\s*-{3,}[\s-]*$"
    r"|^\s*\[(?:WARNING|INFO)\] .*(?:ops?|extension|compatible|installed|sparse_attn|async_io|evoformer)"
    r"|^\s+\S")  # an indented continuation (accelerate's config, a wrapped value)
_NOT_ROW = re.compile(r"^\s*(?:Traceback|File \"|\[rank|\[default)|(?:Error|Exception|Warning|Interrupt|Exit)\b\s*:"
                      r"|^\s*(?:ERROR|CRITICAL|FATAL)\b|^\s*\[?[EFW]\d{3,4} ")


def is_row(line: str) -> bool:
    """Whether a line has the shape of an environment report's row (or is blank)."""
    if not line.strip():
        return True
    return not _NOT_ROW.search(line) and _ROW.match(line) is not None


def without_reports(lines: list[str]) -> list[str]:
    """The lines outside environment reports."""
    out: list[str] = []
    inside = False
    for line in lines:
        if not inside and _START.match(line):
            inside = True
            continue
        if inside and is_row(line):
            continue
        inside = False
        out.append(line)
    return out
