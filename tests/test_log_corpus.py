"""The real-log corpus (tests/data/logs): every sidecar meta is complete, names known causes, has its log.

Fast and static: no torchrun here. The logs themselves are re-created by tests/data/make_logs.py.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import yaml

from distdoctor import knowledge, paths
from distdoctor.diagnose.prefixes import split_prefix

LOGS = paths.ROOT / "tests" / "data" / "logs"
FIELD_REPORTS = paths.SHARED / "field-reports"
METAS = sorted(LOGS.glob("*.meta.yaml"))
REQUIRED = ("source", "expected_cause", "first_failure_rank")
KNOWN_KEYS = {*REQUIRED, "also", "context", "notes", "program"}
URL = re.compile(r"https?://\S+")


def _name(meta_path: Path) -> str:
    return meta_path.name[: -len(".meta.yaml")]


def _load(meta_path: Path) -> dict:
    data = yaml.safe_load(meta_path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{meta_path.name}: top level must be a mapping"
    return data


@pytest.fixture(scope="module")
def taxonomy() -> dict[str, dict]:
    try:
        return knowledge.load_taxonomy()
    except knowledge.KnowledgeError as exc:  # the shared folder is not beside this checkout
        pytest.skip(str(exc))


def test_corpus_is_there() -> None:
    assert len(METAS) >= 20, f"only {len(METAS)} metas in {LOGS}"
    assert any(m.name.startswith("gen_") for m in METAS)
    assert any(m.name.startswith("field_") for m in METAS)


@pytest.mark.parametrize("meta_path", METAS, ids=_name)
def test_meta_is_valid(meta_path: Path, taxonomy: dict[str, dict]) -> None:
    meta = _load(meta_path)
    name = meta_path.name
    for key in REQUIRED:
        assert key in meta, f"{name}: missing required field {key!r}"
    unknown = set(meta) - KNOWN_KEYS
    assert not unknown, f"{name}: unknown field(s) {sorted(unknown)}"
    assert meta["expected_cause"] in taxonomy, f"{name}: expected_cause {meta['expected_cause']!r} not in taxonomy"
    rank = meta["first_failure_rank"]
    assert rank is None or (isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0), \
        f"{name}: first_failure_rank must be a rank >= 0 or null, got {rank!r}"
    also = meta.get("also", [])
    assert isinstance(also, list), f"{name}: also must be a list"
    for cause in also:
        assert cause in taxonomy, f"{name}: also names {cause!r}, not in taxonomy"
    assert meta["expected_cause"] not in also, f"{name}: also repeats expected_cause"
    for key in ("context", "notes"):
        assert isinstance(meta.get(key, ""), str), f"{name}: {key} must be a string"
    if "program" in meta:
        assert (paths.ROOT / meta["program"]).is_file(), f"{name}: program {meta['program']} does not exist"


@pytest.mark.parametrize("meta_path", METAS, ids=_name)
def test_source_is_traceable(meta_path: Path) -> None:
    source = _load(meta_path)["source"]
    name = meta_path.name
    assert isinstance(source, str) and source.strip(), f"{name}: empty source"
    if source.startswith("produced here: "):
        assert len(source) > len("produced here: ") + 5, f"{name}: 'produced here:' without the command"
    elif source.startswith("field report "):
        report = source[len("field report "):].strip()
        assert re.fullmatch(r"[\w.-]+\.md", report), f"{name}: field report must name a .md file: {report!r}"
        if FIELD_REPORTS.is_dir():
            assert (FIELD_REPORTS / report).is_file(), f"{name}: no field report {report}"
    else:
        assert URL.match(source), f"{name}: source must be 'produced here: ...', a URL or 'field report <file>'"


@pytest.mark.parametrize("meta_path", METAS, ids=_name)
def test_log_exists_and_is_not_empty(meta_path: Path) -> None:
    name = _name(meta_path)
    log, folder = LOGS / f"{name}.log", LOGS / f"{name}.d"
    assert log.is_file() or folder.is_dir(), f"{name}: neither {log.name} nor {folder.name}/ exists"
    if log.is_file():
        assert log.stat().st_size > 0, f"{log.name} is empty"
        log.read_bytes().decode("utf-8")  # raises with the position if a log is not UTF-8
    if folder.is_dir():
        files = [p for p in folder.rglob("*") if p.is_file()]
        assert any(p.stat().st_size > 0 for p in files), f"{folder.name}/ has no non-empty file"


def test_every_log_has_a_meta() -> None:
    orphans = [p.name for p in LOGS.iterdir()
               if (p.suffix == ".log" and p.is_file()) or (p.suffix == ".d" and p.is_dir())
               if not (LOGS / f"{p.stem}.meta.yaml").is_file()]
    assert not orphans, f"logs without a .meta.yaml: {orphans}"


def _make_logs():
    spec = importlib.util.spec_from_file_location("make_logs", paths.ROOT / "tests" / "data" / "make_logs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_logs", module)  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_generated_logs_match_make_logs() -> None:
    """Every gen_* log can be re-created by make_logs.py, with the cause make_logs.py gives it."""
    cases = {c.name: c for c in _make_logs().CASES}
    for meta_path in (m for m in METAS if m.name.startswith("gen_")):
        name = _name(meta_path)
        assert name in cases, f"{name}: not a case of tests/data/make_logs.py"
        meta = _load(meta_path)
        case = cases[name]
        assert meta["expected_cause"] == case.cause, f"{name}: meta and make_logs.py disagree on the cause"
        assert meta["source"].startswith("produced here: "), f"{name}: gen_ logs are produced here"
        assert (paths.ROOT / "evals" / "programs" / case.program).is_file(), f"{name}: no {case.program}"
    for case in cases.values():
        assert re.fullmatch(r"gen_[a-z0-9_]+", case.name), f"{case.name}: case names are gen_<snake_case>"
        assert case.expect, f"{case.name}: a case must say what its run has to show"
    used = {c.program for c in cases.values()}
    unused = [p.name for p in (paths.ROOT / "evals" / "programs").glob("fail_*.py") if p.name not in used]
    assert not unused, f"broken programs no make_logs.py case runs: {unused}"


@pytest.mark.skipif(not FIELD_REPORTS.is_dir(), reason="../shared/field-reports not beside this checkout")
def test_field_logs_are_verbatim() -> None:
    """A field_* log is a contiguous piece of its report, so its error text is the user's, not ours."""
    for meta_path in (m for m in METAS if m.name.startswith("field_")):
        meta = _load(meta_path)
        report = (FIELD_REPORTS / meta["source"][len("field report "):].strip()).read_text(encoding="utf-8")
        log = (LOGS / f"{_name(meta_path)}.log").read_text(encoding="utf-8")
        assert log.rstrip("\n") in report, f"{meta_path.name}: log text is not a verbatim excerpt of the report"


FRAME = re.compile(r'File "[^"]*/(evals/programs/fail_\w+\.py)", line (\d+), in \w+')


def _code(line: str) -> str:
    """The line without what launchers and collectors put in front (srun's label, torchrun's and torch's
    prefixes, a clock, `ts`'s stamp): the diagnosis's own prefix reader."""
    return split_prefix(line.rstrip("\r"))[2].strip()


def test_generated_logs_are_fresh() -> None:
    """Traceback frames in gen_* logs quote the programs as they are now (else re-run make_logs.py NAME).

    Ranks print interleaved, so the quoted code line is looked for anywhere in the same log.
    """
    stale = []
    for log in sorted(LOGS.glob("gen_*.log")) + sorted(LOGS.glob("gen_*.d/**/*.log")):
        text = log.read_text(encoding="utf-8")
        code_lines = {_code(line) for line in text.splitlines()}
        for frame in FRAME.finditer(text):
            program = paths.ROOT / frame.group(1)
            source = program.read_text(encoding="utf-8").splitlines() if program.is_file() else []
            number = int(frame.group(2))
            if number > len(source) or source[number - 1].strip() not in code_lines:
                stale.append(f"{log.relative_to(LOGS)} quotes {frame.group(1)}:{number}")
                break
    assert not stale, "logs older than their programs: " + "; ".join(stale)
