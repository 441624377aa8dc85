"""Assemble evals/cases.jsonl from the real-log corpus (tests/data/logs/*.log + *.meta.yaml) and the
hand-written word cases (evals/cases_words.yaml). Every case is validated against the case schema."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from distdoctor import paths
from distdoctor.evals.cases import Case, CaseError, case_to_json, validate_case

LOGS = paths.ROOT / "tests" / "data" / "logs"
WORDS = paths.ROOT / "evals" / "cases_words.yaml"
MAX_LOG_CHARS = 24_000  # a case log longer than this keeps its head and its tail
HEAD_CHARS = 6_000
ECHO = re.compile(r"Connection (closed|reset) by peer|SIGTERM|ChildFailedError|Broken pipe")
META_KEYS = {"source", "expected_cause", "first_failure_rank", "also", "context", "notes", "tags"}


def truncate(text: str) -> str:
    """Keep a huge log's first HEAD_CHARS and last characters, cut at line ends, with a marker between."""
    if len(text) <= MAX_LOG_CHARS:
        return text
    head_end = text.rfind("\n", 0, HEAD_CHARS) + 1 or HEAD_CHARS
    tail_start = text.find("\n", len(text) - (MAX_LOG_CHARS - HEAD_CHARS)) + 1 or len(text) - (MAX_LOG_CHARS - HEAD_CHARS)
    omitted = text.count("\n", head_end, tail_start)
    return text[:head_end] + f"[... {omitted} lines omitted by build_cases.py ...]\n" + text[tail_start:]


def origin_tag(source: str) -> str:
    s = source.strip().lower()
    if s.startswith("produced here"):
        return "produced-here"
    if s.startswith("field report"):
        return "field"
    if "http://" in s or "https://" in s:
        return "public"
    return "other"


def case_from_log(log: Path, taxonomy: dict[str, dict]) -> Case:
    meta_path = log.with_name(log.name[:-len(".log")] + ".meta.yaml")
    where = str(meta_path)
    if not meta_path.is_file():
        raise CaseError(f"{log}: no sidecar {meta_path.name}")
    try:
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise CaseError(f"{where}{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(meta, dict):
        raise CaseError(f"{where}: expected a mapping")
    for key in ("source", "expected_cause"):
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise CaseError(f"{where}: field {key}: missing or not a string")
    cause = meta["expected_cause"]
    if taxonomy and cause not in taxonomy:
        raise CaseError(f"{where}: field expected_cause: {cause!r} is not a cause id of taxonomy.yaml")
    text = log.read_text(encoding="utf-8", errors="replace")
    tags = [origin_tag(meta["source"])] + [str(t) for t in meta.get("tags") or []]
    also = [a for a in meta.get("also") or [] if a != cause]
    if also:
        tags.append("two-causes")
    ffr = meta.get("first_failure_rank")
    if ECHO.search(text) and (cause != "peer_died_first" or (isinstance(ffr, int) and ffr > 0)):
        tags.append("echo-louder")
    patch = (taxonomy.get(cause) or {}).get("patch") if taxonomy else None
    obj = {"id": log.name[:-len(".log")], "log": truncate(text), "source": meta["source"].strip(),
           "expected_cause": cause, "tags": sorted(set(tags))}
    if meta.get("context"):
        obj["context"] = str(meta["context"])
    if patch:
        obj["expected_patch"] = patch
    if also:
        obj["also"] = also
    if isinstance(ffr, int):
        obj["first_failure_rank"] = ffr
    folder = log.with_name(log.name[:-len(".log")] + ".d")
    if folder.is_dir():  # torchrun --log-dir output recorded with the console log
        obj["files"] = {f.relative_to(folder).as_posix(): truncate(f.read_text(encoding="utf-8", errors="replace"))
                        for f in sorted(folder.rglob("*")) if f.is_file()}
    validate_case(obj, where)
    return _case(obj)


def word_cases(path: Path, taxonomy: dict[str, dict]) -> list[Case]:
    """Hand-written cases: a person's words (and optionally a short real log) per entry."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise CaseError(f"{path}{f':{mark.line + 1}' if mark else ''}: invalid YAML") from None
    if not isinstance(data, list):
        raise CaseError(f"{path}: expected a list of cases")
    out = []
    for i, item in enumerate(data):
        where = f"{path}: item {i}"
        if not isinstance(item, dict):
            raise CaseError(f"{where}: expected a mapping")
        obj = {"log": "", "source": "words: hand-written description of a symptom, no log", **item}
        tags = set(obj.get("tags") or [])
        if not obj["log"]:
            tags.add("words-only")
        obj["tags"] = sorted(tags)
        cause = obj.get("expected_cause")
        if taxonomy and isinstance(cause, str):
            if cause not in taxonomy:
                raise CaseError(f"{where}: field expected_cause: {cause!r} is not a cause id of taxonomy.yaml")
            if taxonomy[cause].get("patch") and "expected_patch" not in obj:
                obj["expected_patch"] = taxonomy[cause]["patch"]
        validate_case(obj, where)
        out.append(_case(obj))
    return out


def _case(obj: dict) -> Case:
    return Case(id=obj["id"], log=obj["log"], source=obj["source"], expected_cause=obj["expected_cause"],
                context=obj.get("context", ""), expected_patch=obj.get("expected_patch"),
                also=tuple(obj.get("also", ())), first_failure_rank=obj.get("first_failure_rank"),
                tags=tuple(obj.get("tags", ())), files=tuple(sorted(obj.get("files", {}).items())))


def build(logs: Path = LOGS, words: Path = WORDS, taxonomy: dict[str, dict] | None = None) -> list[Case]:
    """All cases: one per corpus log (sorted by name), then the word cases. Ids must be unique."""
    taxonomy = taxonomy or {}
    cases = [case_from_log(p, taxonomy) for p in sorted(logs.glob("*.log")) if p.is_file()]
    if words.is_file():
        cases += word_cases(words, taxonomy)
    seen: set[str] = set()
    for c in cases:
        if c.id in seen:
            raise CaseError(f"duplicate case id {c.id!r}")
        seen.add(c.id)
    return cases


def coverage(cases: list[Case], taxonomy: dict[str, dict], corpus_causes: list[str] = ()) -> list[str]:
    """Problems with coverage: fewer than 3 cases for a cause, fewer than 5 for a cause with a patch.

    `corpus_causes` (one label per real-log corpus case, evals/corpus/) counts too: a long-tail cause is
    measured on the real logs of the corpus rather than on eval cases made for it."""
    counts = {c: 0 for c in taxonomy}
    for cause in [case.expected_cause for case in cases] + list(corpus_causes):
        counts[cause] = counts.get(cause, 0) + 1
    problems = []
    for cause, info in taxonomy.items():
        need = 5 if info.get("patch") else 3
        if counts[cause] < need:
            problems.append(f"{cause}: {counts[cause]} case(s), need {need}")
    return problems


def to_jsonl(cases: list[Case]) -> str:
    import json

    return "".join(json.dumps(case_to_json(c), ensure_ascii=False) + "\n" for c in cases)
