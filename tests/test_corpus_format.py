"""The public real-log corpus (evals/corpus): every case is complete, labelled with a known cause, traceable.

Static checks only: fields, cause ids (references/taxonomy.yaml, the long-tail table of
evals/corpus/README.md, or a cause proposed in evals/corpus/NEW_CAUSES.yaml), an https source,
the frozen held-out rule, a non-empty log.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from distdoctor import paths

CORPUS = paths.ROOT / "evals" / "corpus"
METAS = sorted(CORPUS.glob("*.meta.yaml"))
REQUIRED = ("source", "cause", "confidence", "fix", "first_failure_rank", "split")
KNOWN_KEYS = {*REQUIRED, "context", "notes", "text"}
CONFIDENCE = {"confirmed", "likely", "uncertain"}
TEXT = {"printed", "prose"}
CASE_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
LONG_TAIL_ROW = re.compile(r"^\| ([a-z][a-z0-9_]*) \|", re.MULTILINE)


def _case_id(meta_path: Path) -> str:
    return meta_path.name[: -len(".meta.yaml")]


def _split_of():
    spec = importlib.util.spec_from_file_location("corpus_split", CORPUS / "split.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.split_of


def _proposed() -> dict[str, list[str]]:
    """{proposed cause id: its case ids} from NEW_CAUSES.yaml (empty where the file is absent)."""
    path = CORPUS / "NEW_CAUSES.yaml"
    if not path.is_file():
        return {}
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))["causes"]
    return {entry["id"]: list(entry["cases"]) for entry in entries}


@pytest.fixture(scope="module")
def known_causes() -> set[str]:
    taxonomy = yaml.safe_load(paths.TAXONOMY.read_text(encoding="utf-8"))["causes"]
    long_tail = set(LONG_TAIL_ROW.findall((CORPUS / "README.md").read_text(encoding="utf-8"))) - {"id"}
    return set(taxonomy) | long_tail | set(_proposed())


def test_split_rule_is_the_readme_one() -> None:
    split_of = _split_of()
    ids = [f"case-{n}" for n in range(2000)]
    held = sum(split_of(i) == "heldout" for i in ids)
    assert 0.25 < held / len(ids) < 0.35
    assert {split_of(i) for i in ids} == {"train", "heldout"}


@pytest.mark.parametrize("meta_path", METAS, ids=_case_id)
def test_case_is_valid(meta_path: Path, known_causes: set[str]) -> None:
    case_id, name = _case_id(meta_path), meta_path.name
    assert CASE_ID.fullmatch(case_id), f"{name}: id must be lowercase [a-z0-9-]"
    meta = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
    assert isinstance(meta, dict), f"{name}: top level must be a mapping"
    missing = [key for key in REQUIRED if key not in meta]
    assert not missing, f"{name}: missing field(s) {missing}"
    unknown = set(meta) - KNOWN_KEYS
    assert not unknown, f"{name}: unknown field(s) {sorted(unknown)}"
    assert meta["cause"] in known_causes, \
        f"{name}: cause {meta['cause']!r} is in neither taxonomy.yaml, the README's table nor NEW_CAUSES.yaml"
    assert meta["confidence"] in CONFIDENCE, f"{name}: confidence {meta['confidence']!r}"
    assert meta.get("text", "printed") in TEXT, f"{name}: text {meta['text']!r} is neither printed nor prose"
    assert meta.get("text") != "prose" or meta.get("notes"), f"{name}: a prose case says in notes why it has no log"
    assert str(meta["source"]).startswith("https://"), f"{name}: source must be an https URL"
    assert meta["split"] == _split_of()(case_id), f"{name}: split {meta['split']!r} breaks the held-out rule"
    rank = meta["first_failure_rank"]
    assert rank is None or (isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0), \
        f"{name}: first_failure_rank must be a rank >= 0 or null"
    assert meta["fix"] is None or (isinstance(meta["fix"], str) and meta["fix"].strip()), f"{name}: fix is text or null"
    log = CORPUS / f"{case_id}.log"
    assert log.is_file() and log.read_text(encoding="utf-8").strip(), f"{name}: {log.name} missing or empty"


def test_every_log_has_a_meta() -> None:
    orphans = [p.name for p in CORPUS.glob("*.log") if not (CORPUS / f"{p.stem}.meta.yaml").is_file()]
    assert not orphans, f"logs without meta: {orphans}"


def test_one_case_per_thread() -> None:
    sources: dict[str, str] = {}
    for meta_path in METAS:
        source = yaml.safe_load(meta_path.read_text(encoding="utf-8"))["source"]
        assert source not in sources, f"{meta_path.name} and {sources[source]} quote the same thread"
        sources[source] = meta_path.name


def test_proposed_causes_list_their_cases() -> None:
    taxonomy = yaml.safe_load(paths.TAXONOMY.read_text(encoding="utf-8"))["causes"]
    for cause, cases in _proposed().items():
        assert cause not in taxonomy, f"NEW_CAUSES.yaml: {cause} is already a taxonomy id"
        labelled = {_case_id(m) for m in METAS if yaml.safe_load(m.read_text(encoding="utf-8"))["cause"] == cause}
        assert labelled == set(cases), f"NEW_CAUSES.yaml: {cause} lists {sorted(cases)}, cases labelled so: {sorted(labelled)}"
