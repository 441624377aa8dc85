"""The real-log corpus (evals/corpus/): load and validate `<id>.log` + `<id>.meta.yaml`, and the frozen split.

A case is held out iff `int(sha256(id).hexdigest(), 16) % 10 < 3` (evals/corpus/README.md): the rule depends
on the id alone, and the `split` written in a meta must agree with it. Retrieval (distdoctor.diagnose.retrieval)
reads the train cases only; nothing here ever hands a held-out case to anything that tunes or retrieves.
`text` says what a case's log is: `printed` (the default: what the program, launcher or library printed) or
`prose` (the thread has no printed failure text, only people's words); the eval scores the two apart.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from distdoctor import paths

CORPUS = paths.ROOT / "evals" / "corpus"
ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
CONFIDENCE = ("confirmed", "likely", "uncertain")
TEXT = ("printed", "prose")  # printed: output of the program/launcher/library; prose: people's words (no log)
REQUIRED = ("source", "cause", "confidence", "split")
KNOWN_KEYS = {*REQUIRED, "fix", "first_failure_rank", "context", "notes", "text"}
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where PyYAML has it: same results
MAX_LOG = 4 * 1024 * 1024  # a corpus log is an excerpt from a thread; bigger means something went wrong


class CorpusError(ValueError):
    """A corpus case that breaks the format; the message names the file and the field."""


@dataclass(frozen=True)
class CorpusCase:
    id: str
    log: str
    source: str
    cause: str
    confidence: str
    split: str
    fix: str | None = None
    first_failure_rank: int | None = None
    context: str = ""
    notes: str = ""
    text: str = "printed"

    @property
    def kind(self) -> str:
        """Where the text comes from: github-issue, github-discussion, pytorch-forum, stackoverflow, docs, other."""
        return source_kind(self.source)


def split_of(case_id: str) -> str:
    """The frozen split of a case id: "heldout" for about 30% of ids, chosen by a hash of the id alone."""
    return "heldout" if int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 10 < 3 else "train"


def source_kind(source: str) -> str:
    s = source.lower()
    if "github.com/" in s:
        return "github-discussion" if "/discussions/" in s else "github-issue"
    if "discuss.pytorch.org" in s:
        return "pytorch-forum"
    if "stackoverflow.com" in s or "stackexchange.com" in s:
        return "stackoverflow"
    if "forums." in s or "discuss." in s or "forum" in s:
        return "forum"
    if s.startswith("http"):
        return "docs"
    return "other"


def load_case(meta_path: Path, causes: set[str] | None = None) -> CorpusCase:
    """One case from its meta file (and the .log beside it); CorpusError names what is wrong."""
    name = meta_path.name
    case_id = name[:-len(".meta.yaml")]
    where = f"{meta_path}"
    if not ID.match(case_id):
        raise CorpusError(f"{where}: id {case_id!r} must be lowercase [a-z0-9-]")
    try:
        meta = yaml.load(meta_path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
    except OSError as exc:
        raise CorpusError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{where}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(meta, dict):
        raise CorpusError(f"{where}: top level must be a mapping")
    for key in REQUIRED:
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise CorpusError(f"{where}: field {key}: missing or not a string")
    unknown = sorted(set(meta) - KNOWN_KEYS)
    if unknown:
        raise CorpusError(f"{where}: unknown field(s) {', '.join(unknown)}")
    if not re.match(r"https?://\S+$", meta["source"].strip()):
        raise CorpusError(f"{where}: field source: must be the URL the text is quoted from")
    if meta["confidence"] not in CONFIDENCE:
        raise CorpusError(f"{where}: field confidence: {meta['confidence']!r} is not one of {', '.join(CONFIDENCE)}")
    if causes is not None and meta["cause"] not in causes:
        raise CorpusError(f"{where}: field cause: {meta['cause']!r} is not an id of references/taxonomy.yaml")
    want = split_of(case_id)
    if meta["split"] != want:
        raise CorpusError(f"{where}: field split: {meta['split']!r}, but the frozen rule gives {want!r}")
    text_kind = meta.get("text", "printed")
    if text_kind not in TEXT:
        raise CorpusError(f"{where}: field text: {text_kind!r} is not one of {', '.join(TEXT)}")
    ffr = meta.get("first_failure_rank")
    if ffr is not None and (isinstance(ffr, bool) or not isinstance(ffr, int) or ffr < 0):
        raise CorpusError(f"{where}: field first_failure_rank: a rank >= 0 or null, got {ffr!r}")
    for key in ("fix", "context", "notes"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise CorpusError(f"{where}: field {key}: must be a string")
    log = meta_path.with_name(case_id + ".log")
    if not log.is_file():
        raise CorpusError(f"{where}: no {log.name} beside it")
    try:
        data = log.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{log}: cannot read: {exc.strerror or exc}") from None
    if not data.strip():
        raise CorpusError(f"{log}: empty log")
    if len(data) > MAX_LOG:
        raise CorpusError(f"{log}: {len(data)} bytes is more than an excerpt ({MAX_LOG} bytes at most)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise CorpusError(f"{log}:{line}: not UTF-8") from None
    return CorpusCase(case_id, text, meta["source"].strip(), meta["cause"], meta["confidence"], meta["split"],
                      meta.get("fix"), ffr, meta.get("context") or "", meta.get("notes") or "", text_kind)


def load_corpus(root: Path = CORPUS, causes: set[str] | None = None,
                errors: list[str] | None = None, split: str | None = None) -> list[CorpusCase]:
    """Every case of a corpus folder, sorted by id. With `errors`, bad cases are reported there and skipped;
    without, the first one raises CorpusError. Logs without a meta are errors too. With `split`, only the cases
    the frozen rule puts in that split are read at all (split_of on the file name, before its meta or log is
    opened): `split="train"` never reads a held-out file."""
    root = Path(root)
    out: list[CorpusCase] = []
    problems: list[str] = []
    if not root.is_dir():
        return out
    for meta in sorted(root.glob("*.meta.yaml")):
        if split is not None and split_of(meta.name[:-len(".meta.yaml")]) != split:
            continue
        try:
            out.append(load_case(meta, causes))
        except CorpusError as exc:
            problems.append(str(exc))
    for log in sorted(root.glob("*.log")):
        if split is not None and split_of(log.name[:-len(".log")]) != split:
            continue
        if log.is_symlink() and not log.exists():
            problems.append(f"{log}: broken symbolic link")
        elif not log.with_name(log.name[:-len(".log")] + ".meta.yaml").is_file():
            problems.append(f"{log}: no .meta.yaml beside it")
    if problems and errors is None:
        raise CorpusError(problems[0])
    if errors is not None:
        errors.extend(problems)
    return out


@lru_cache(maxsize=4)
def train_cases(root: str | None = None) -> tuple[CorpusCase, ...]:
    """The train split of a corpus (default evals/corpus/), split by the frozen rule; bad cases are skipped.
    Held-out cases never come out of here, whatever their meta says."""
    cases = load_corpus(Path(root) if root else CORPUS, errors=[], split="train")
    return tuple(c for c in cases if split_of(c.id) == "train")
