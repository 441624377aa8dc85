"""Load the knowledge base: reference entries (references/*.md) and the cause taxonomy.

An entry is a `### <cause_id> — <title>` heading, a fenced ```yaml block (validated by
schemas/entry.schema.json), then prose. Fenced ```text blocks in the prose are real error text;
the nearest preceding line starting with `Source:` says where each came from.
This module is the only reader of that format: diagnosis, validation and evals all go through it.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from distdoctor import paths
from distdoctor.cache import cache_dir, write_atomic

HEADING = re.compile(r"^### (?P<id>[a-z][a-z0-9_]*) — (?P<title>.+?)\s*$")
FENCE = re.compile(r"^```(?P<info>[\w-]*)\s*$")
ANCHOR = re.compile(r"""^\s*<a\s+(?:id|name)=["'][^"']+["']\s*>\s*</a>\s*$""")


class KnowledgeError(ValueError):
    """A reference file that does not follow the entry format; the message names file and line."""


@dataclass(frozen=True)
class Signature:
    regex: str
    proves: str
    kind: str  # root | echo | hint
    weight: float = 1.0
    when: str | None = None  # counts only if this regex matches some line of the same input
    unless: str | None = None  # does not count if this regex matches some line of the same input
    when_ranks_differ: str | None = None  # counts only if this regex's `value` group differs between ranks
    unless_ranks_differ: str | None = None  # does not count if it does
    level: str | None = None  # "symptom": a line several causes print; "context": a launch line; alone, candidates

    @property
    def compiled(self) -> re.Pattern[str]:
        return _compile(self.regex)


@dataclass(frozen=True)
class Quote:
    """A block of real error text quoted in an entry, with its stated source."""

    text: str
    source: str | None
    line: int


@dataclass
class Entry:
    cause: str
    title: str
    file: Path
    line: int
    block: dict
    prose: str
    quotes: list[Quote] = field(default_factory=list)

    @property
    def patch(self) -> str | None:
        return self.block.get("patch")

    @property
    def related(self) -> list[str]:
        return list(self.block.get("related", []))

    @property
    def verify(self) -> str:
        return self.block.get("verify", "")

    @property
    def signatures(self) -> list[Signature]:
        return [Signature(s["regex"], s["proves"], s["kind"], float(s.get("weight", 1.0)), s.get("when"),
                          s.get("unless"), s.get("when_ranks_differ"), s.get("unless_ranks_differ"), s.get("level"))
                for s in self.block.get("signatures", [])]

    @property
    def keywords(self) -> list[str]:
        return [k if isinstance(k, str) else k["regex"] for k in self.block.get("keywords", [])]

    @property
    def setting_keywords(self) -> list[str]:
        """The keywords marked `level: context`: words that only say how the job was set up."""
        return [k["regex"] for k in self.block.get("keywords", []) if isinstance(k, dict) and k.get("level") == "context"]

    @property
    def anchor(self) -> str:
        """Relative link to this entry, e.g. references/backends.md#nccl_without_cuda."""
        return f"{self.file.parent.name}/{self.file.name}#{self.cause}"

    def section(self, name: str) -> str:
        """The prose of a bold-labelled section (**Symptom**, **Fix**, ...), up to the next one."""
        m = re.search(rf"^\*\*{re.escape(name)}\*\*[^\n]*\n(?P<body>.*?)(?=^\*\*[A-Z][^*\n]*\*\*|\Z)",
                      self.prose, re.M | re.S)
        return m.group("body").strip() if m else ""


@lru_cache(maxsize=None)
def _compile(regex: str) -> re.Pattern[str]:
    return re.compile(regex)


@lru_cache(maxsize=1)
def entry_schema() -> dict:
    return json.loads((paths.SCHEMAS / "entry.schema.json").read_text(encoding="utf-8"))


def parse_file(path: Path, errors: list[KnowledgeError] | None = None) -> list[Entry]:
    """Parse one references/*.md file into entries; raise KnowledgeError naming file:line.

    With `errors` (a list), a malformed entry is appended there and skipped instead, so a
    validator can report every bad entry of a file and still see the good ones.

    A file whose exact bytes already passed the schema check (a stamp in the user's cache, keyed by the file's
    and the schema's sha256) is not checked again outside the validator: diagnosis then never imports
    jsonschema (~8 MB and a tenth of a second per run).
    """
    text = path.read_text(encoding="utf-8")
    stamp = None if errors is not None else _checked_stamp(text)
    checked = stamp is not None and stamp.exists()
    entries = _parse_lines(path, text.splitlines(), errors, check_schema=not checked)
    if stamp is not None and not checked:
        write_atomic(stamp, b"")
    return entries


def _checked_stamp(text: str) -> Path:
    digest = hashlib.sha256(text.encode("utf-8"))
    digest.update((paths.SCHEMAS / "entry.schema.json").read_bytes())
    return cache_dir("kb-checked", digest.hexdigest()[:32])


def _next_heading(lines: list[str], i: int) -> int:
    while i < len(lines) and not HEADING.match(lines[i]):
        i += 1
    return i


def _parse_lines(path: Path, lines: list[str], errors: list[KnowledgeError] | None,
                 check_schema: bool = True) -> list[Entry]:
    import yaml  # here, not at the top: entry_links() serves fast-starting tools without it

    entries: list[Entry] = []
    i = 0
    while i < len(lines):
        m = HEADING.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or lines[j].strip() != "```yaml":
            err = KnowledgeError(f"{path}:{start + 1}: entry {m['id']!r} must be followed by a ```yaml block")
            if errors is None:
                raise err
            errors.append(err)
            i = _next_heading(lines, start + 1)
            continue
        k = j + 1
        while k < len(lines) and lines[k].strip() != "```":
            k += 1
        if k >= len(lines):
            err = KnowledgeError(f"{path}:{j + 1}: unterminated ```yaml block of entry {m['id']!r}")
            if errors is None:
                raise err
            errors.append(err)
            i = _next_heading(lines, start + 1)
            continue
        try:
            # libyaml's loader where PyYAML was built with it (same results, ~10x faster start-up)
            block = yaml.load("\n".join(lines[j + 1:k]), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        except yaml.YAMLError as exc:
            err = KnowledgeError(f"{path}:{j + 1}: YAML of entry {m['id']!r}: {exc}".replace("\n", " "))
            if errors is None:
                raise err from exc
            errors.append(err)
            i = _next_heading(lines, start + 1)
            continue
        schema_errors = _schema_errors(block) if check_schema else []
        if schema_errors:
            e = schema_errors[0]
            where = "/".join(str(p) for p in e.path) or "(block)"
            err = KnowledgeError(f"{path}:{j + 1}: entry {m['id']!r} field {where}: {e.message}")
            if errors is None:
                raise err
            errors.append(err)
            i = _next_heading(lines, start + 1)
            continue
        if block["cause"] != m["id"]:
            err = KnowledgeError(f"{path}:{j + 1}: block cause {block['cause']!r} differs from heading id {m['id']!r}")
            if errors is None:
                raise err
            errors.append(err)
            i = _next_heading(lines, start + 1)
            continue
        end = k + 1
        while end < len(lines) and not lines[end].startswith("### ") and not lines[end].startswith("## "):
            end += 1
        prose_lines = lines[k + 1:end]
        while prose_lines and (not prose_lines[-1].strip() or ANCHOR.match(prose_lines[-1])):
            prose_lines = prose_lines[:-1]  # the next entry's `<a id="...">` anchor is not this entry's prose
        entries.append(Entry(m["id"], m["title"], path, start + 1, block, "\n".join(prose_lines),
                             _quotes(prose_lines, k + 2)))
        i = end
    return entries


def _schema_errors(block: dict) -> list:
    import jsonschema  # here: a file already checked (see parse_file) never needs it

    return sorted(jsonschema.Draft202012Validator(entry_schema()).iter_errors(block), key=lambda e: list(e.path))


def _quotes(prose: list[str], first_line: int) -> list[Quote]:
    quotes: list[Quote] = []
    source: str | None = None
    i = 0
    while i < len(prose):
        line = prose[i]
        if line.strip().lower().startswith("source:"):
            source = line.strip()[len("source:"):].strip()
        m = FENCE.match(line.strip())
        if m:
            j = i + 1
            while j < len(prose) and prose[j].strip() != "```":
                j += 1
            if m["info"] == "text":
                quotes.append(Quote("\n".join(prose[i + 1:j]), source, first_line + i))
            i = j + 1
            continue
        i += 1
    return quotes


@lru_cache(maxsize=4)
def load_entries(root: Path = paths.REFERENCES) -> tuple[Entry, ...]:
    """All entries of references/*.md, in file order."""
    out: list[Entry] = []
    for md in sorted(Path(root).glob("*.md")):
        out.extend(parse_file(md))
    return tuple(out)


def entries_by_cause(root: Path = paths.REFERENCES) -> dict[str, Entry]:
    return {e.cause: e for e in load_entries(root)}


@lru_cache(maxsize=4)
def entry_links(root: Path = paths.REFERENCES) -> dict[str, str]:
    """{cause: 'references/<file>.md#<cause>'} from the entry headings alone (no YAML, no schema check): for
    tools that only link to the entry and must start fast (scripts/hang.py)."""
    out: dict[str, str] = {}
    for md in sorted(Path(root).glob("*.md")):
        for line in md.read_text(encoding="utf-8").splitlines():
            m = HEADING.match(line)
            if m:
                out.setdefault(m["id"], f"{md.parent.name}/{md.name}#{m['id']}")
    return out


def load_taxonomy(path: Path | None = None) -> dict[str, dict]:
    """The cause vocabulary ({id: {summary, symptoms, patch}}), from references/taxonomy.yaml."""
    path = path or paths.taxonomy_path()
    if path is None:
        raise KnowledgeError("taxonomy.yaml not found: references/taxonomy.yaml is missing (or set DISTDOCTOR_TAXONOMY)")
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return dict(data["causes"])


def often_behind(references_root: Path | str | None = None) -> dict[str, tuple[str, ...]]:
    """Cause -> the root causes it is usually the visible face of (the taxonomy's `often_behind`, in its order):
    the default taxonomy for the default references, `<references_root>/taxonomy.yaml` for another (none: {})."""
    path = paths.taxonomy_path() if not references_root or Path(references_root).resolve() == paths.REFERENCES.resolve() \
        else Path(references_root) / "taxonomy.yaml"
    return _often_behind_in(str(path) if path is not None else None)


@lru_cache(maxsize=8)
def _often_behind_in(path: str | None) -> dict[str, tuple[str, ...]]:
    causes = load_taxonomy(Path(path)) if path is not None and Path(path).is_file() else {}
    return {c: tuple(v.get("often_behind") or ()) for c, v in causes.items() if isinstance(v, dict)}


MIN_ANSWERED = 5  # logs an answer needs in its track record before the diagnosis quotes it


def track_record(cause: str, verdict: str, references_root: Path | str | None = None) -> dict | None:
    """How often answering `cause` first with `verdict` was right on corpus logs of repositories left out
    (references/track_record.yaml, distdoctor.evals.track_record), or None with fewer than MIN_ANSWERED logs."""
    root = Path(references_root) if references_root else paths.REFERENCES
    data = _track_records_in(str(root / "track_record.yaml"))
    rec = (data.get("causes") or {}).get(cause, {}).get(verdict)
    if not rec or rec.get("answered", 0) < MIN_ANSWERED:
        return None
    return {"cause": cause, "verdict": verdict, "answered": rec["answered"], "right": rec["right"],
            "instead": list(rec.get("instead") or [])[:3], "how": data.get("how", ""), "logs": data.get("logs"),
            "measured": data.get("measured")}


@lru_cache(maxsize=4)
def _track_records_in(path: str) -> dict:
    import yaml

    p = Path(path)
    if not p.is_file():
        return {}
    data = yaml.safe_load(p.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}
