"""Eval cases: load evals/cases.jsonl, validate every line against schemas/case.schema.json.

Errors name the file, the line and the field (`cases.jsonl:12: field expected_cause: ...`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from distdoctor import paths

MAX_CASE_FILE = 64 * 1024 * 1024  # a case file bigger than this is refused, not read


class CaseError(ValueError):
    """A case file that cannot be used; the message names file:line and the field."""


@dataclass(frozen=True)
class Case:
    id: str
    log: str
    source: str
    expected_cause: str
    context: str = ""
    expected_patch: str | None = None
    also: tuple[str, ...] = ()
    first_failure_rank: int | None = None
    tags: tuple[str, ...] = ()
    line: int = 0
    files: tuple[tuple[str, str], ...] = ()  # per-rank log files (relative path, text) beside the log

    def payload(self) -> dict:
        """What a responder sees: the logs and the person's words, never the expected answer or its source."""
        out = {"id": self.id, "log": self.log, "context": self.context}
        if self.files:
            out["files"] = dict(self.files)
        return out

    @property
    def origin(self) -> str:
        """produced (here, by torch 2.13), public (quoted with a URL), field (field report) or words."""
        s = self.source.strip().lower()
        if s.startswith("produced here"):
            return "produced"
        if s.startswith("field report"):
            return "field"
        if s.startswith("words"):
            return "words"
        if "http://" in s or "https://" in s:
            return "public"
        return "other"


@lru_cache(maxsize=1)
def case_schema() -> dict:
    return json.loads((paths.SCHEMAS / "case.schema.json").read_text(encoding="utf-8"))


def validate_case(obj: object, where: str) -> None:
    """Raise CaseError naming `where` and the first failing field of `obj`."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(case_schema()).iter_errors(obj),
                    key=lambda e: (list(map(str, e.path)), e.message))
    if errors:
        e = errors[0]
        fld = "/".join(str(p) for p in e.path)
        if not fld and e.validator == "required":
            fld = e.message.split("'")[1] if "'" in e.message else "(case)"
        if not fld and e.validator == "anyOf":
            fld, msg = "log", "a case needs a non-empty log or a non-empty context"
        else:
            msg = e.message
        if len(msg) > 200:
            msg = msg[:200] + "..."
        raise CaseError(f"{where}: field {fld or '(case)'}: {msg}")


def parse_cases(text: str, name: str, causes: set[str] | None = None) -> list[Case]:
    """Parse JSONL text (one case per non-blank line); `causes` restricts expected/also ids."""
    out: list[Case] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        where = f"{name}:{n}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CaseError(f"{where}: not valid JSON (column {exc.colno}): {exc.msg}") from None
        validate_case(obj, where)
        if obj["id"] in seen:
            raise CaseError(f"{where}: field id: duplicate id {obj['id']!r} (first on line {seen[obj['id']]})")
        seen[obj["id"]] = n
        if causes is not None:
            for fld in ("expected_cause",):
                if obj[fld] not in causes:
                    raise CaseError(f"{where}: field {fld}: {obj[fld]!r} is not a cause id of taxonomy.yaml")
            for i, c in enumerate(obj.get("also", [])):
                if c not in causes:
                    raise CaseError(f"{where}: field also/{i}: {c!r} is not a cause id of taxonomy.yaml")
        out.append(Case(id=obj["id"], log=obj["log"], source=obj["source"], expected_cause=obj["expected_cause"],
                        context=obj.get("context", ""), expected_patch=obj.get("expected_patch"),
                        also=tuple(obj.get("also", ())), first_failure_rank=obj.get("first_failure_rank"),
                        tags=tuple(obj.get("tags", ())), line=n, files=tuple(sorted(obj.get("files", {}).items()))))
    if not out:
        raise CaseError(f"{name}: no cases in the file")
    return out


def load_cases(path: str | Path, causes: set[str] | None = None) -> list[Case]:
    """Read and validate a case file; every problem is a one-line CaseError."""
    p = Path(path)
    if not p.exists():
        raise CaseError(f"{p}: no such file")
    if not p.is_file():
        raise CaseError(f"{p}: not a regular file")
    size = p.stat().st_size
    if size > MAX_CASE_FILE:
        raise CaseError(f"{p}: {size} bytes is larger than the {MAX_CASE_FILE} byte limit for a case file")
    data = p.read_bytes()
    if b"\x00" in data[:8192]:
        raise CaseError(f"{p}: binary file, expected JSON lines")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise CaseError(f"{p}:{line}: not UTF-8 (byte {exc.start})") from None
    return parse_cases(text, str(p), causes)


def case_to_json(case: Case) -> dict:
    """The JSONL form of a case (omitting empty optional fields)."""
    d: dict = {"id": case.id, "log": case.log, "source": case.source}
    if case.files:
        d["files"] = dict(case.files)
    if case.context:
        d["context"] = case.context
    d["expected_cause"] = case.expected_cause
    if case.expected_patch:
        d["expected_patch"] = case.expected_patch
    if case.also:
        d["also"] = list(case.also)
    if case.first_failure_rank is not None:
        d["first_failure_rank"] = case.first_failure_rank
    if case.tags:
        d["tags"] = list(case.tags)
    return d
