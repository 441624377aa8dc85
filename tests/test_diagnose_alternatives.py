"""A confident answer keeps its top cause and lists alternatives after it (issue 13): other scored causes, then
known failures of the same template and BM25 neighbours, each with its level and what to check, never a patch;
the JSON output (schemas/diagnosis.schema.json) still validates."""

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from distdoctor.diagnose import alternatives, diagnose_paths, diagnose_text
from distdoctor.diagnose.calibrate import CONFIDENT, LEVELS
from distdoctor.diagnose.matcher import CompiledSignature
from distdoctor.evals.answers_diff import compare
from distdoctor.diagnose.render import render

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "logs"
SCHEMA = json.loads((ROOT / "schemas" / "diagnosis.schema.json").read_text(encoding="utf-8"))
# real logs produced here (tests/data/logs/*.meta.yaml say how): the first gen_* ones, whatever they answer
SAMPLE = sorted(LOGS.glob("gen_*.log"))[:16]
TOP_FIELDS = ("verdict", "fix", "patch", "patch_withheld", "entry", "verify", "first_failure")


def _without_alternatives(path: Path, monkeypatch) -> dict:
    with monkeypatch.context() as m:
        m.setattr(alternatives, "ALTERNATIVES", 0)
        return diagnose_paths([str(path)])


def test_confident_answers_keep_their_top_and_list_alternatives_without_a_patch(monkeypatch):
    assert len(SAMPLE) >= 10
    retrieved = 0
    for path in SAMPLE:
        old, new = _without_alternatives(path, monkeypatch), diagnose_paths([str(path)])
        assert {f: new[f] for f in TOP_FIELDS} == {f: old[f] for f in TOP_FIELDS}, path.name
        assert new["causes"][:len(old["causes"])] == old["causes"], path.name  # the scored causes, unchanged
        if new["verdict"] != "confident":
            assert len(new["causes"]) == len(old["causes"]) and all(c["role"] == "candidate" for c in new["causes"])
            continue
        assert new["causes"][0]["role"] == "top" and all(c["role"] == "alternative" for c in new["causes"][1:])
        added = new["causes"][len(old["causes"]):]
        assert len(new["causes"]) <= max(len(old["causes"]), 1 + alternatives.ALTERNATIVES), path.name
        assert len({c["id"] for c in new["causes"]}) == len(new["causes"])
        for c in added:
            assert c["patch"] is None and not c["patch_ready"] and c["patch_note"] is None, (path.name, c["id"])
            assert c["level"] in LEVELS and [e["level"] for e in c["evidence"]] == [c["level"]]
            assert c["evidence"][0]["kind"] in ("structural", "similar", "typical") and c["check"]
            retrieved += c["level"] not in CONFIDENT
        text = render(new)
        if len(new["causes"]) > 1:
            assert "Also consider" in text
            for c in new["causes"][1:3]:
                assert f"  - {c['id']} — " in text
        assert text.count("Patch:") == 1 and text.count("Fix:") <= 1  # the top cause's only
    assert retrieved, "no confident answer of the sample got an alternative that rests on retrieval"


def test_similar_alternatives_clear_the_threshold():
    for path in SAMPLE:
        r = diagnose_paths([str(path)])
        for c in r["causes"][1:]:
            ev = c["evidence"][0]
            if c["role"] == "alternative" and ev["kind"] == "similar" and c["patch"] is None:
                share = float(ev["proves"].rsplit("votes: ", 1)[1].split()[0])
                assert share >= alternatives.ALT_SIMILAR_MIN, (path.name, c["id"], share)


@pytest.mark.parametrize("make", [
    lambda: diagnose_paths([str(SAMPLE[0])]),
    lambda: diagnose_text("", context="it hangs when I save a checkpoint"),  # candidates
    lambda: diagnose_text("all good\n"),  # nothing failed
    lambda: diagnose_paths([str(LOGS / "no-such-file.log")]),  # an input error
], ids=["confident", "words", "quiet", "missing"])
def test_results_validate_against_the_schema(make):
    jsonschema.validate(make(), SCHEMA)


def test_cli_json_validates_and_shows_roles():
    path = next(p for p in SAMPLE if diagnose_paths([str(p)])["verdict"] == "confident")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "diagnose.py"), str(path), "--json", "--quiet"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    jsonschema.validate(out, SCHEMA)
    assert out["causes"][0]["role"] == "top"


def _sig(cause: str, **cond) -> CompiledSignature:
    return CompiledSignature(cause, 0, re.compile("x"), "root", 4.0, "", (), False, **cond)


def test_a_reading_the_conditions_rule_out_is_never_an_alternative():
    # `unless` met: ruled out; `when` unmet where another cause's matched signature has it as `unless`: the
    # other reading of the same line won; `when` unmet alone: the log just does not show it
    sigs = [_sig("a", unless="U"), _sig("b", when="W"), _sig("c", unless="W"), _sig("d", when="V")]
    assert alternatives.ruled_out(sigs, {"U"}) == {"a", "b"}
    assert alternatives.ruled_out(sigs, {"U", "W"}) == {"a", "c"}
    assert alternatives.ruled_out(sigs, set()) == {"b"}


def test_answers_diff_flags_a_changed_top_and_counts_top3():
    row = {"set": "train", "id": "x", "expected": "a", "text": "printed", "top1": "b", "verdict": "confident",
           "level": "signature", "fix": "f", "patch": None, "ranked": ["b"], "levels": ["signature"]}
    same_top = {**row, "ranked": ["b", "a"], "levels": ["signature", "similar"]}
    diffs, lines = compare([row], [same_top])
    assert diffs == [] and "top-3 0/1 -> 1/1" in lines[0]
    diffs, _ = compare([row], [{**same_top, "top1": "a", "ranked": ["a", "b"]}])
    assert diffs == ["train x: top1 'b' -> 'a'"]


# real logs whose confident top cause is a symptom of others (tests/data/logs/*.meta.yaml give their sources)
SYMPTOM_LOGS = [LOGS / "public_collective_timeout_ofa.log", LOGS / "public_rendezvous_unreachable_pt79388.log"]


@pytest.mark.parametrize("path", SYMPTOM_LOGS, ids=lambda p: p.stem)
def test_a_symptom_top_cause_gets_its_usual_roots_after_the_evidence(path):
    with alternatives.using_roots({}):
        old = diagnose_paths([str(path)])
    new = diagnose_paths([str(path)])
    top = new["causes"][0]["id"]
    roots = alternatives.roots_of(top)
    assert new["verdict"] == "confident" and roots, (path.name, top)
    assert {f: new[f] for f in TOP_FIELDS} == {f: old[f] for f in TOP_FIELDS}
    assert new["causes"][:len(old["causes"])] == old["causes"]  # the log's own alternatives first, unchanged
    added = new["causes"][len(old["causes"]):]
    assert added and len(new["causes"]) == 1 + alternatives.ALTERNATIVES
    # in the taxonomy's order, none the log already named (one its conditions rule out is skipped too)
    ids = [c["id"] for c in added]
    assert set(ids) <= set(roots) and sorted(ids, key=roots.index) == ids
    assert not set(ids) & {c["id"] for c in old["causes"]}
    for c in added:
        assert c["role"] == "alternative" and c["level"] == "typical" and c["patch"] is None and not c["patch_ready"]
        assert [e["kind"] for e in c["evidence"]] == ["typical"] and top in c["evidence"][0]["proves"]
        assert c["check"] and c["entry"]
    jsonschema.validate(new, SCHEMA)
    text = render(new)
    assert "what usually lies behind the top cause" in text and text.count("Fix:") <= 1
    assert "(score 0" not in text  # a typical root is not scored


def test_a_root_cause_or_a_candidates_answer_gets_no_usual_roots():
    for path in SAMPLE:
        r = diagnose_paths([str(path)])
        top = r["causes"][0]["id"] if r["causes"] else None
        if r["verdict"] != "confident" or not alternatives.roots_of(top):
            assert all(c["level"] != "typical" for c in r["causes"]), path.name
    words = diagnose_text("", context="the job times out in a collective (watchdog) after 10 minutes")
    assert words["verdict"] != "confident" and all(c["level"] != "typical" for c in words["causes"])


def test_pick_fills_only_free_places_with_unlisted_allowed_roots():
    from types import SimpleNamespace

    entries = {c: SimpleNamespace(title=c, anchor=f"x.md#{c}", section=lambda name: "Symptom text here: yes.")
               for c in ("t", "a", "b", "c", "d")}
    top = [{"id": "t"}]
    # a structural alternative first; then the roots: 'a' already taken, 'b' ruled out, 'zz' not an entry
    got = alternatives.pick([("a", 1.0, {"kind": "structural"})], lambda: [], entries, top, {"b"},
                            roots=("a", "b", "zz", "c", "d"))
    assert [(c["id"], c["level"]) for c in got] == [("a", "structural"), ("c", "typical")]
    assert alternatives.pick([], lambda: [], entries, top + [{"id": "a"}, {"id": "b"}], set(), roots=("c",)) == []
