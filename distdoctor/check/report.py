"""Render findings as linters do: text (`path:line:col: CODE message`), JSON, SARIF 2.1.0, GitHub annotations."""

from __future__ import annotations

import json
from functools import lru_cache

from distdoctor.check.base import Finding

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@lru_cache(maxsize=None)
def entry_links() -> dict[str, str]:
    """cause id -> its knowledge-base entry (`references/hangs-and-collectives.md#rank_conditional_collective`)."""
    try:
        from distdoctor.knowledge import entries_by_cause

        return {cause: f"references/{e.anchor.split('/', 1)[-1]}" for cause, e in entries_by_cause().items()}
    except Exception:  # a broken knowledge base must not stop the checker; links fall back to the taxonomy
        return {}


def link(cause: str) -> str:
    return entry_links().get(cause, f"references/taxonomy.yaml#{cause}")


def as_dict(f: Finding) -> dict:
    return {"path": f.path, "line": f.line, "col": f.col, "code": f.code, "cause": f.cause,
            "severity": f.severity, "message": f.message, "reference": link(f.cause)}


def text(findings: list[Finding]) -> str:
    return "".join(f"{f.path}:{f.line}:{f.col}: {f.code} {f.message} [{f.cause}: {link(f.cause)}]\n"
                   for f in findings)


def as_json(findings: list[Finding]) -> str:
    return json.dumps([as_dict(f) for f in findings], indent=2) + "\n"


def github(findings: list[Finding]) -> str:
    def esc(s: str) -> str:
        return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    out = []
    for f in findings:
        level = "error" if f.severity == "error" else "warning"
        out.append(f"::{level} title=distdoctor ({f.code}),file={esc(f.path)},line={f.line},col={f.col}::"
                   f"{esc(f'{f.code} {f.message} [{f.cause}]')}\n")
    return "".join(out)


def sarif(findings: list[Finding], rules) -> str:
    """SARIF 2.1.0, one run, every selected rule described (GitHub code scanning reads this)."""
    descriptors = [{
        "id": m.RULE.code, "name": m.RULE.cause,
        "shortDescription": {"text": m.RULE.title},
        "fullDescription": {"text": " ".join((m.__doc__ or m.RULE.title).split())},
        "helpUri": f"https://github.com/distdoctor/distdoctor/blob/main/{link(m.RULE.cause)}",
        "defaultConfiguration": {"level": "error" if m.RULE.severity == "error" else "warning"},
        "properties": {"cause": m.RULE.cause, "reference": link(m.RULE.cause)},
    } for m in rules]
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    results = [{
        "ruleId": f.code, "ruleIndex": index.get(f.code, 0),
        "level": "error" if f.severity == "error" else "warning",
        "message": {"text": f"{f.message} [{f.cause}]"},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": f.path[2:] if f.path.startswith("./") else f.path},
            "region": {"startLine": max(f.line, 1), "startColumn": max(f.col, 1)}}}],
        "properties": {"cause": f.cause, "reference": link(f.cause)},
    } for f in findings]
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "distdoctor-check", "informationUri": "https://github.com/distdoctor/distdoctor",
                            "rules": descriptors}},
        "results": results}]}
    return json.dumps(doc, indent=2) + "\n"
