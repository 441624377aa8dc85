"""The committed eval cases: schema, coverage of the taxonomy, provenance, hard cases; and the built-in eval
scored against them with a threshold (CI's accuracy gate)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from distdoctor.evals import build
from distdoctor.evals.cases import CaseError, load_cases
from distdoctor.knowledge import load_taxonomy

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "evals" / "cases.jsonl"
# CI gate for the built-in diagnosis: a little under the top-1 measured when RESULTS.md was written.
MIN_TOP1 = 0.85


@pytest.fixture(scope="module")
def taxonomy() -> dict:
    return load_taxonomy()


@pytest.fixture(scope="module")
def cases(taxonomy: dict):
    return load_cases(CASES, set(taxonomy))


def test_cases_cover_every_cause(cases, taxonomy: dict) -> None:
    """Every cause is measured: eval cases plus real-log corpus cases, 3 at least (5 for a cause with a patch)."""
    from distdoctor.corpus import load_corpus

    assert len(cases) >= 80
    corpus = [c.cause for c in load_corpus(causes=set(taxonomy))]
    counts = Counter([c.expected_cause for c in cases] + corpus)
    for cause, info in taxonomy.items():
        need = 5 if info.get("patch") else 3
        assert counts[cause] >= need, f"{cause}: {counts[cause]} cases, need {need}"
    assert build.coverage(cases, taxonomy, corpus) == []
    # a seed cause with a patch is still covered by eval cases of its own (the closed loop needs them)
    for cause, info in taxonomy.items():
        if info.get("patch"):
            assert Counter(c.expected_cause for c in cases)[cause] >= 5, cause


def test_cases_provenance_and_hard_cases(cases, taxonomy: dict) -> None:
    origins = Counter(c.origin for c in cases)
    assert origins["public"] >= 30 and origins["produced"] >= 5 and origins["words"] >= 20
    assert origins["other"] == 0, [c.id for c in cases if c.origin == "other"]
    for c in cases:
        if c.origin == "public":
            assert c.source.startswith("https://"), c.id
            assert c.id.startswith("public_") and c.log, c.id
        if c.origin == "words":
            assert c.context and "words-only" in c.tags, c.id
        if c.expected_patch:
            assert taxonomy[c.expected_cause]["patch"] == c.expected_patch, c.id
    tags = Counter(t for c in cases for t in c.tags)
    assert tags["echo-louder"] >= 3 and tags["two-causes"] >= 3 and tags["words-only"] >= 20


def test_public_logs_have_valid_sidecars(taxonomy: dict) -> None:
    logs = sorted((ROOT / "tests" / "data" / "logs").glob("public_*.log"))
    assert len(logs) >= 40
    for log in logs:
        meta = yaml.safe_load(log.with_name(log.name[:-4] + ".meta.yaml").read_text(encoding="utf-8"))
        assert meta["source"].startswith("https://github.com/"), log.name
        assert meta["expected_cause"] in taxonomy, log.name
        assert log.read_text(encoding="utf-8").strip(), log.name


def test_build_reads_the_corpus_and_reports_bad_meta(tmp_path: Path, taxonomy: dict) -> None:
    built = build.build(taxonomy=taxonomy)
    assert len(built) >= 80 and len({c.id for c in built}) == len(built)
    assert all(c.log or c.context for c in built)
    (tmp_path / "x.log").write_text("boom\n")
    (tmp_path / "x.meta.yaml").write_text("source: s\nexpected_cause: [not, a, string]\n")
    with pytest.raises(CaseError, match="x.meta.yaml: field expected_cause"):
        build.build(tmp_path, tmp_path / "none.yaml", taxonomy)
    (tmp_path / "x.meta.yaml").write_text("source: 's\nexpected_cause: port_in_use\n")
    with pytest.raises(CaseError, match=r"x.meta.yaml:\d+: invalid YAML"):
        build.build(tmp_path, tmp_path / "none.yaml", taxonomy)
    big = "line\n" * 20000
    assert len(build.truncate(big)) <= build.MAX_LOG_CHARS + 100 and "lines omitted" in build.truncate(big)


def test_builtin_eval_meets_threshold(tmp_path: Path) -> None:
    pytest.importorskip("distdoctor.diagnose", reason="the diagnosis engine (distdoctor/diagnose.py) is not there yet")
    r = subprocess.run([sys.executable, str(ROOT / "evals" / "run_evals.py"), "--json", "--min-top1", str(MIN_TOP1),
                        "--results", str(tmp_path / "R.md"), "-q"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["n"] >= 80 and 0 <= out["top3"] <= 1 and out["top1"] >= MIN_TOP1
    assert out["top3"] >= out["top1"]


def test_case_schema_is_valid_and_build_check_reports_stale(tmp_path: Path) -> None:
    import jsonschema

    from distdoctor.evals.cases import case_schema

    jsonschema.Draft202012Validator.check_schema(case_schema())
    script = str(ROOT / "evals" / "build_cases.py")
    r = subprocess.run([sys.executable, script, "--check", "--out", str(tmp_path / "none.jsonl")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "is stale" in r.stderr
    r = subprocess.run([sys.executable, script, "--out", str(tmp_path / "c.jsonl")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, script, "--check", "--out", str(tmp_path / "c.jsonl")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(load_cases(tmp_path / "c.jsonl")) >= 80
