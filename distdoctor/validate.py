"""Validate the knowledge base: references/*.md, profiles/*.md and SKILL.md.

Every problem is reported as `file:line: what`. The checks:
- each cause of the taxonomy has exactly one entry, and no entry names an unknown cause;
- an entry's patch id is the taxonomy's and exists as patches/<id>.py; related ids exist;
- the prose has **Symptom**, **Root cause**, **Fix**, **Verify**; every quoted ```text block has a
  `Source:` (produced here, a field report that exists, or an https URL); field-report quotes are
  found verbatim in that report;
- every signature regex compiles, is not anchored with `^` (log lines carry prefixes), does not match
  an empty or neutral line when it claims a root cause, and matches a line of its own entry's quotes;
  no signature matches another entry's quotes unless the two entries are declared related;
- every relative link to a file or a heading resolves (`references/<file>.md#<cause_id>` included);
- SKILL.md front matter obeys the Agent Skills spec and SKILL.md links every entry; profiles have
  schema-valid front matter, the fixed section order, and Gotchas that link entries.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from distdoctor import knowledge, paths
from distdoctor.diagnose.matcher import anchors_of
from distdoctor.diagnose.rank_values import ranks_differ

MAX_BYTES = 2_000_000  # a knowledge file larger than this is a mistake, not documentation
SKILL_KEYS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
SKILL_MAX_LINES = 500
PROFILE_SECTIONS = ["## Launch", "## Per-rank logs", "## Debugging a hang", "## Cleaning up", "## Gotchas"]
ENTRY_SECTIONS = ["Symptom", "Root cause", "Fix", "Verify"]
# Lines found in almost every failing log: a signature that claims a root cause must not match them.
NEUTRAL_LINES = [
    "Traceback (most recent call last):",
    '  File "/work/train.py", line 12, in <module>',
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "[rank0]: RuntimeError: something went wrong",
    "step 100: train loss 2.3456, val loss 2.4567",
    "W1123 07:11:12.476000 11155 torch/distributed/run.py:803] *****************************************",
    "  exitcode  : 1 (pid: 11169)",
]
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
EXPLICIT_ANCHOR = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
FIELD_REPORT = re.compile(r"field report\s+([\w.-]+\.md)", re.I)


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


class Validator:
    """Collects problems over one checkout (root) against one taxonomy."""

    def __init__(self, root: Path = paths.ROOT, taxonomy: Path | None = None,
                 field_reports: Path | None = None) -> None:
        self.root = Path(root).resolve()
        self.taxonomy_path = taxonomy if taxonomy is not None else _default_taxonomy(self.root)
        self.field_reports = field_reports if field_reports is not None else paths.field_reports_dir()
        self.problems: list[Problem] = []
        self.notices: list[str] = []
        self.entries: list[knowledge.Entry] = []
        self._texts: dict[Path, list[str]] = {}

    # -- helpers -------------------------------------------------------------------------------
    def rel(self, path: Path) -> str:
        """The path relative to the checkout, without following a symlink in its last part."""
        path = Path(path)
        for candidate in (Path(os.path.abspath(path)), path.parent.resolve() / path.name):
            try:
                return str(candidate.relative_to(self.root))
            except ValueError:
                continue
        return str(path)

    def add(self, path: Path, line: int, what: str) -> None:
        self.problems.append(Problem(self.rel(path), line, what))

    def read_lines(self, path: Path) -> list[str] | None:
        """The file's lines, or None after reporting why it cannot be read as a text file."""
        if path in self._texts:
            return self._texts[path]
        if path.is_symlink():
            self.add(path, 1, "is a symlink; knowledge files must be regular files in the repository")
            return None
        try:
            data = path.read_bytes()
        except OSError as exc:
            self.add(path, 1, f"cannot read: {exc.strerror or exc}")
            return None
        if len(data) > MAX_BYTES:
            self.add(path, 1, f"file is {len(data)} bytes, over the {MAX_BYTES}-byte limit")
            return None
        if b"\x00" in data:
            self.add(path, 1, "binary file (contains NUL bytes), expected UTF-8 Markdown")
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b"\n") + 1
            self.add(path, line, f"not valid UTF-8 (byte {exc.start})")
            return None
        self._texts[path] = text.splitlines()
        return self._texts[path]

    # -- entry point ---------------------------------------------------------------------------
    def run(self) -> list[Problem]:
        taxonomy = self.check_taxonomy()
        self.check_references(taxonomy)
        self.check_profiles()
        self.check_skill()
        self.check_links()
        self.problems = list(dict.fromkeys(self.problems))  # a file unreadable for two checks is reported once
        return self.problems

    def check_taxonomy(self) -> dict[str, dict]:
        if self.taxonomy_path is None or not Path(self.taxonomy_path).is_file():
            self.problems.append(Problem(str(self.taxonomy_path or "taxonomy.yaml"), 1,
                                         "taxonomy not found: references/taxonomy.yaml is missing (or set DISTDOCTOR_TAXONOMY)"))
            return {}
        try:
            data = yaml.safe_load(Path(self.taxonomy_path).read_text(encoding="utf-8"))
            causes = data["causes"]
            if not isinstance(causes, dict):
                raise TypeError("causes is not a mapping")
            return {str(k): (v or {}) for k, v in causes.items()}
        except (yaml.YAMLError, KeyError, TypeError, UnicodeDecodeError) as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            self.problems.append(Problem(str(self.taxonomy_path), line, f"malformed taxonomy: {exc}".replace("\n", " ")))
            return {}

    # -- references ----------------------------------------------------------------------------
    def check_references(self, taxonomy: dict[str, dict]) -> None:
        ref_dir = self.root / "references"
        files = sorted(ref_dir.glob("*.md")) if ref_dir.is_dir() else []
        if not files:
            self.add(ref_dir, 1, "no references/*.md files")
        for md in files:
            if self.read_lines(md) is None:
                continue
            errors: list[knowledge.KnowledgeError] = []
            self.entries.extend(knowledge.parse_file(md, errors))
            for err in errors:
                self.problems.append(_problem_from_error(self, str(err)))
        seen: dict[str, knowledge.Entry] = {}
        for e in self.entries:
            if e.cause in seen:
                first = seen[e.cause]
                self.add(e.file, e.line, f"duplicate entry for cause {e.cause!r} (first at {self.rel(first.file)}:{first.line})")
            else:
                seen[e.cause] = e
            if taxonomy and e.cause not in taxonomy:
                self.add(e.file, e.line, f"cause {e.cause!r} is not in the taxonomy")
        for cause in taxonomy:
            if cause not in seen:
                self.add(ref_dir, 1, f"cause {cause!r} has no entry in references/*.md")
        for e in self.entries:
            self.check_entry(e, taxonomy)
        self.check_often_behind(taxonomy, seen)
        self.check_cross_matches()

    def check_often_behind(self, taxonomy: dict[str, dict], entries: dict[str, knowledge.Entry]) -> None:
        """A cause's `often_behind` lists distinct taxonomy ids, each one an entry relates to the cause (the
        cause's `related`, or the root's): what the knowledge base already says lies behind it."""
        path = Path(self.taxonomy_path) if self.taxonomy_path else Path("taxonomy.yaml")
        lines = (self.read_lines(path) or []) if path.is_file() else []
        for cause, spec in taxonomy.items():
            roots = spec.get("often_behind") if isinstance(spec, dict) else None
            if roots is None:
                continue
            line = next((i + 1 for i, ln in enumerate(lines) if ln.strip() == f"{cause}:"), 1)
            if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
                self.add(path, line, f"cause {cause!r}: often_behind must be a list of cause ids")
                continue
            if len(set(roots)) != len(roots):
                self.add(path, line, f"cause {cause!r}: often_behind lists an id twice")
            for root in roots:
                if root == cause or root not in taxonomy:
                    self.add(path, line, f"cause {cause!r}: often_behind id {root!r} is "
                                         + ("the cause itself" if root == cause else "not in the taxonomy"))
                elif cause in entries and root in entries and root not in entries[cause].related \
                        and cause not in entries[root].related:
                    self.add(path, line, f"cause {cause!r}: often_behind id {root!r} is related to it by no entry "
                                         f"(add it to one entry's `related` first)")

    def check_entry(self, e: knowledge.Entry, taxonomy: dict[str, dict]) -> None:
        block_line = e.line + 2
        if e.patch is not None:
            if not _patch_exists(self.root, e.patch):
                self.add(e.file, block_line, f"entry {e.cause!r}: patch {e.patch!r} not found (expected patches/{e.patch}.py)")
        expected = taxonomy.get(e.cause, {}).get("patch")
        if e.cause in taxonomy and e.patch != expected:
            self.add(e.file, block_line, f"entry {e.cause!r}: patch {e.patch!r} differs from the taxonomy's {expected!r}")
        for rel in e.related:
            if rel == e.cause:
                self.add(e.file, block_line, f"entry {e.cause!r} lists itself as related")
            elif taxonomy and rel not in taxonomy:
                self.add(e.file, block_line, f"entry {e.cause!r}: related id {rel!r} is not in the taxonomy")
        for name in ENTRY_SECTIONS:
            if not re.search(rf"^\*\*{re.escape(name)}\*\*", e.prose, re.M):
                self.add(e.file, e.line, f"entry {e.cause!r}: missing **{name}** section")
        if not e.quotes:
            self.add(e.file, e.line, f"entry {e.cause!r}: no real error text (a ```text block with a Source: line)")
        for q in e.quotes:
            self.check_quote(e, q)
        quote_lines = [ln for q in e.quotes for ln in q.text.splitlines()]
        for n, sig in enumerate(e.block.get("signatures", [])):
            where = f"entry {e.cause!r} signature {n} ({sig['regex']!r})"
            try:
                rx = re.compile(sig["regex"])
            except re.error as exc:
                self.add(e.file, block_line, f"{where}: regex does not compile: {exc}")
                continue
            for field in ("when", "unless"):
                if field in sig:
                    try:
                        if re.compile(sig[field]).search(""):
                            self.add(e.file, block_line, f"{where}: {field} regex matches an empty line")
                    except re.error as exc:
                        self.add(e.file, block_line, f"{where}: {field} regex does not compile: {exc}")
            if "when_ranks_differ" in sig:
                self.check_ranks_differ(e, block_line, f"{where}: when_ranks_differ", sig["when_ranks_differ"],
                                        quote_lines)
            if "unless_ranks_differ" in sig:
                self.check_ranks_differ(e, block_line, f"{where}: unless_ranks_differ", sig["unless_ranks_differ"],
                                        None)
            if sig["regex"].startswith("^"):
                self.add(e.file, block_line, f"{where}: anchored with '^', but log lines carry prefixes like '[rank3]:'")
            if rx.search(""):
                self.add(e.file, block_line, f"{where}: matches an empty line")
                continue
            if sig["kind"] == "root":
                hit = next((ln for ln in NEUTRAL_LINES if rx.search(ln)), None)
                if hit is not None:
                    self.add(e.file, block_line, f"{where}: a root signature matches the neutral line {hit!r}")
            if not any(rx.search(ln) for ln in quote_lines):
                self.add(e.file, block_line, f"{where}: matches no line of the entry's own quoted text")
        for n, kw in enumerate(e.keywords):
            try:
                rx = re.compile(kw)
            except re.error as exc:
                self.add(e.file, block_line, f"entry {e.cause!r} keyword {n} ({kw!r}): regex does not compile: {exc}")
                continue
            if rx.search(""):
                self.add(e.file, block_line, f"entry {e.cause!r} keyword {n} ({kw!r}): matches an empty string")

    def check_ranks_differ(self, e: knowledge.Entry, block_line: int, where: str, regex: str,
                           quote_lines: list[str] | None) -> None:
        """A `when_ranks_differ` / `unless_ranks_differ` regex compiles, names its value, has a literal (it
        makes lines candidates), matches no empty line and (`when_`: quote_lines given) finds values in
        the entry's own quotes."""
        try:
            rx = re.compile(regex)
        except re.error as exc:
            self.add(e.file, block_line, f"{where} regex does not compile: {exc}")
            return
        if "value" not in rx.groupindex:
            self.add(e.file, block_line, f"{where} regex has no group named 'value'")
        elif rx.search(""):
            self.add(e.file, block_line, f"{where} regex matches an empty line")
        elif not anchors_of(regex)[0]:
            self.add(e.file, block_line, f"{where} regex has no literal text to find its lines by")
        elif quote_lines is not None and not any(rx.search(ln) for ln in quote_lines):
            self.add(e.file, block_line, f"{where} regex matches no line of the entry's own quoted text")

    def check_quote(self, e: knowledge.Entry, q: knowledge.Quote) -> None:
        if not q.text.strip():
            self.add(e.file, q.line, f"entry {e.cause!r}: empty ```text block")
        src = (q.source or "").strip()
        if not src:
            self.add(e.file, q.line, f"entry {e.cause!r}: quoted text has no 'Source:' line before it")
            return
        low = src.lower()
        m = FIELD_REPORT.search(src)
        if m:
            self.check_field_quote(e, q, m.group(1))
        elif low.startswith("produced here"):
            if "torch" not in low:
                self.add(e.file, q.line, f"entry {e.cause!r}: a 'produced here' source must name the torch version")
        elif not re.search(r"https://\S+", src):
            self.add(e.file, q.line, f"entry {e.cause!r}: source {src!r} is neither 'produced here: ...', "
                                     "'field report <file>', nor an https URL")

    def check_field_quote(self, e: knowledge.Entry, q: knowledge.Quote, name: str) -> None:
        if self.field_reports is None or not self.field_reports.is_dir():
            self.notices.append(f"field reports not found; quotes from {name} not checked")
            return
        report = self.field_reports / name
        if not report.is_file():
            self.add(e.file, q.line, f"entry {e.cause!r}: field report {name!r} does not exist")
            return
        haystack = _norm(report.read_text(encoding="utf-8", errors="replace"))
        for k, line in enumerate(q.text.splitlines()):
            if line.strip() and _norm(line) not in haystack:
                self.add(e.file, q.line + 1 + k, f"entry {e.cause!r}: line not found verbatim in field report {name}: {line.strip()[:80]!r}")

    def check_cross_matches(self) -> None:
        for a in self.entries:
            for sig in a.block.get("signatures", []):
                try:
                    rx = re.compile(sig["regex"])
                except re.error:
                    continue
                if rx.search(""):
                    continue
                for b in self.entries:
                    if b.cause == a.cause or b.cause in a.related or a.cause in b.related:
                        continue
                    for q in b.quotes:
                        if "when_ranks_differ" in sig and not ranks_differ(q.text.splitlines(), sig["when_ranks_differ"]):
                            continue  # the signature cannot count on this text: its condition does not hold there
                        if "when" in sig and not any(re.search(sig["when"], ln) for ln in q.text.splitlines()):
                            continue  # nor when its `when` condition is met nowhere in it
                        hit = next((ln for ln in q.text.splitlines() if rx.search(ln)), None)
                        if hit is not None:
                            self.add(a.file, a.line + 2,
                                     f"entry {a.cause!r} signature {sig['regex']!r} matches text quoted in entry "
                                     f"{b.cause!r} ({self.rel(b.file)}:{q.line}: {hit.strip()[:60]!r}); declare them related "
                                     "or make the regex more specific")
                            break

    # -- profiles ------------------------------------------------------------------------------
    def check_profiles(self) -> None:
        prof_dir = self.root / "profiles"
        files = sorted(prof_dir.glob("*.md")) if prof_dir.is_dir() else []
        if not files:
            return
        schema_path = self.root / "schemas" / "profile.schema.json"
        schema = None
        if schema_path.is_file():
            try:
                schema = json.loads(schema_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                self.add(schema_path, getattr(exc, "lineno", 1), f"schema is not valid JSON: {exc}")
        else:
            self.notices.append("schemas/profile.schema.json absent: profile front matter not schema-checked")
        for md in files:
            lines = self.read_lines(md)
            if lines is None:
                continue
            front, body_start = self.front_matter(md, lines)
            if front is not None and schema is not None:
                import jsonschema
                for err in sorted(jsonschema.Draft202012Validator(schema).iter_errors(front), key=lambda x: list(x.path)):
                    where = "/".join(str(p) for p in err.path) or "(front matter)"
                    self.add(md, _key_line(lines, err.path), f"front matter field {where}: {err.message}")
            heads = [(n, ln.rstrip()) for n, ln in _prose_lines(lines) if n > body_start and ln.startswith("## ")]
            found = [h for h in heads if h[1] in PROFILE_SECTIONS]
            names = [h[1] for h in found]
            for sec in PROFILE_SECTIONS:
                if sec not in names:
                    self.add(md, 1, f"profile lacks section {sec!r}")
                elif names.count(sec) > 1:
                    self.add(md, found[names.index(sec, names.index(sec) + 1)][0], f"profile repeats section {sec!r}")
            if "## Gotchas" in names:
                start = next(ln for ln, h in found if h == "## Gotchas")
                following = [ln for ln, _ in heads if ln > start]
                stop = following[0] - 1 if following else len(lines)
                body = lines[start:stop]
                if not any(re.search(r"\]\(\.\./references/[\w.-]+\.md#[a-z][a-z0-9_]*\)", ln) for ln in body):
                    self.add(md, start, "profile '## Gotchas' links no entry (expected links like "
                                        "[slurm_launch](../references/launch-and-devices.md#slurm_launch))")
            present = [s for s in names if s in PROFILE_SECTIONS]
            ordered = [s for s in PROFILE_SECTIONS if s in present]
            dedup = list(dict.fromkeys(present))
            if dedup != ordered:
                first_bad = next(i for i, (x, y) in enumerate(zip(dedup, ordered)) if x != y)
                line = next(ln for ln, h in found if h == dedup[first_bad])
                self.add(md, line, f"profile section {dedup[first_bad]!r} out of order; expected {' → '.join(PROFILE_SECTIONS)}")

    def front_matter(self, path: Path, lines: list[str]) -> tuple[dict | None, int]:
        """Parse a leading `---` YAML block; report problems; return (mapping or None, first body line index)."""
        if not lines or lines[0].strip() != "---":
            self.add(path, 1, "missing YAML front matter (the file must start with '---')")
            return None, 0
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is None:
            self.add(path, 1, "unterminated YAML front matter (no closing '---')")
            return None, 0
        try:
            data = yaml.safe_load("\n".join(lines[1:end]))
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            self.add(path, (mark.line + 2) if mark is not None else 1,
                     f"front matter is not valid YAML: {getattr(exc, 'problem', exc)}")
            return None, end + 1
        if not isinstance(data, dict):
            self.add(path, 2, "front matter must be a YAML mapping")
            return None, end + 1
        return data, end + 1

    # -- SKILL.md ------------------------------------------------------------------------------
    def check_skill(self) -> None:
        skill = self.root / "SKILL.md"
        if not skill.is_file():
            self.add(skill, 1, "SKILL.md is missing")
            return
        lines = self.read_lines(skill)
        if lines is None:
            return
        if len(lines) >= SKILL_MAX_LINES:
            self.add(skill, SKILL_MAX_LINES, f"SKILL.md has {len(lines)} lines; keep it under {SKILL_MAX_LINES}")
        linked = {m.group(1) for _, ln in _prose_lines(lines)
                  for m in re.finditer(r"\]\(references/[\w.-]+\.md#([a-z][a-z0-9_]*)\)", ln)}
        for e in self.entries:
            if e.cause not in linked:
                self.add(skill, 1, f"SKILL.md does not route to entry {e.cause!r} (no link to {e.anchor})")
        front, _ = self.front_matter(skill, lines)
        if front is None:
            return
        for key in front:
            if key not in SKILL_KEYS:
                self.add(skill, _key_line(lines, [key]), f"front matter key {key!r} is not in the Agent Skills spec ({', '.join(sorted(SKILL_KEYS))})")
        name = front.get("name")
        if not isinstance(name, str) or not name:
            self.add(skill, _key_line(lines, ["name"]), "front matter 'name' is required (a string)")
        else:
            if len(name) > 64:
                self.add(skill, _key_line(lines, ["name"]), f"front matter 'name' is {len(name)} characters; at most 64")
            if not SKILL_NAME.match(name):
                self.add(skill, _key_line(lines, ["name"]), f"front matter 'name' {name!r} must be lowercase letters, digits and single hyphens")
        desc = front.get("description")
        if not isinstance(desc, str) or not desc.strip():
            self.add(skill, _key_line(lines, ["description"]), "front matter 'description' is required (a non-empty string)")
        else:
            if len(desc) > 1024:
                self.add(skill, _key_line(lines, ["description"]), f"front matter 'description' is {len(desc)} characters; at most 1024")
            if "<" in desc or ">" in desc:
                self.add(skill, _key_line(lines, ["description"]), "front matter 'description' must not contain '<' or '>'")

    # -- links ---------------------------------------------------------------------------------
    def check_links(self) -> None:
        files = [self.root / "SKILL.md", self.root / "README.md"]
        for sub in ("references", "profiles"):
            d = self.root / sub
            if d.is_dir():
                files += sorted(d.glob("*.md"))
        for md in files:
            if not md.is_file():
                continue
            lines = self.read_lines(md)
            if lines is None:
                continue
            for n, line in _prose_lines(lines):
                for m in LINK.finditer(_strip_code_spans(line)):
                    self.check_link(md, n, m.group(1))

    def check_link(self, md: Path, line: int, target: str) -> None:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: ...
            return
        path_part, _, anchor = target.partition("#")
        dest = md if not path_part else (md.parent / path_part)
        try:
            dest_res = dest.resolve()
        except OSError:
            dest_res = dest
        if path_part and not dest.exists():
            self.add(md, line, f"link target {target!r} does not exist")
            return
        if anchor:
            if dest.is_dir() or dest.suffix.lower() != ".md":
                self.add(md, line, f"link {target!r} has an anchor but its target is not a Markdown file")
                return
            if anchor not in self.anchors(dest_res):
                self.add(md, line, f"link {target!r}: no heading or anchor {anchor!r} in {self.rel(dest_res)}")

    def anchors(self, md: Path) -> set[str]:
        lines = self.read_lines(md) or []
        out: set[str] = set()
        counts: dict[str, int] = {}
        for _, line in _prose_lines(lines):
            for a in EXPLICIT_ANCHOR.findall(line):
                out.add(a)
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                h = knowledge.HEADING.match(line)
                if h:
                    out.add(h["id"])  # an entry is linked by its cause id
                slug = _slug(m.group(1))
                k = counts.get(slug, 0)
                counts[slug] = k + 1
                out.add(slug if k == 0 else f"{slug}-{k}")
        return out


# -- module helpers ----------------------------------------------------------------------------
def _default_taxonomy(root: Path) -> Path | None:
    if root == paths.ROOT.resolve():
        return paths.taxonomy_path()
    candidate = root / "references" / "taxonomy.yaml"
    return candidate if candidate.is_file() else paths.taxonomy_path()


def _problem_from_error(v: Validator, msg: str) -> Problem:
    m = re.match(r"^(?P<file>.+?):(?P<line>\d+): (?P<what>.*)$", msg, re.S)
    if not m:
        return Problem("references", 1, msg)
    return Problem(v.rel(Path(m["file"])), int(m["line"]), m["what"])


def _patch_exists(root: Path, patch_id: str) -> bool:
    d = root / "patches"
    return (d / f"{patch_id}.py").is_file() or (d / patch_id / "__init__.py").is_file()


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _key_line(lines: list[str], path) -> int:
    keys = list(path)
    if keys:
        key = str(keys[0])
        for i, ln in enumerate(lines[:200]):
            if re.match(rf"^{re.escape(key)}\s*:", ln):
                return i + 1
    return 1


def _prose_lines(lines: list[str]):
    """(1-based line number, line) for lines outside fenced code blocks."""
    fence: str | None = None
    for i, line in enumerate(lines):
        s = line.strip()
        if fence is None and (s.startswith("```") or s.startswith("~~~")):
            fence = s[:3]
            continue
        if fence is not None:
            if s.startswith(fence):
                fence = None
            continue
        yield i + 1, line


def _strip_code_spans(line: str) -> str:
    return re.sub(r"`+[^`]*`+", "", line)


def _slug(heading: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"[`*_\[\]()]", lambda m: "_" if m.group(0) == "_" else "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def validate(root: Path = paths.ROOT, taxonomy: Path | None = None,
             field_reports: Path | None = None) -> tuple[list[Problem], list[str]]:
    """Validate a checkout; return (problems, notices)."""
    v = Validator(root, taxonomy, field_reports)
    v.run()
    return v.problems, v.notices
