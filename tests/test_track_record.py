"""Track records (issue 13, honest confidence): how often an answer of the same kind (cause named first, verdict)
was right on real corpus logs of repositories left out, measured on the train split only, shown beside the answer
in the text report and the JSON, and checked against the held-out split in the corpus eval."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import yaml

from distdoctor import knowledge
from distdoctor.corpus import CORPUS, split_of, train_cases
from distdoctor.diagnose import diagnose_paths
from distdoctor.evals import track_record

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "data" / "logs"
RECORDS = ROOT / "references" / "track_record.yaml"
SCHEMA = json.loads((ROOT / "schemas" / "diagnosis.schema.json").read_text(encoding="utf-8"))


def test_tally_counts_right_answers_and_the_labels_of_the_others():
    recs = track_record.tally([("a", "a", "confident"), ("b", "a", "confident"), ("c", "a", "confident"),
                               ("b", "a", "confident"), ("a", "a", "candidates"), ("a", None, "none")])
    assert set(recs) == {"a"}
    conf = recs["a"]["confident"].as_dict()
    assert conf == {"answered": 4, "right": 1, "instead": [{"id": "b", "n": 2}, {"id": "c", "n": 1}]}
    assert recs["a"]["candidates"].as_dict() == {"answered": 1, "right": 1, "instead": []}


def test_committed_records_are_a_measurement_of_the_train_split():
    data = yaml.safe_load(RECORDS.read_text(encoding="utf-8"))
    taxonomy = knowledge.load_taxonomy()
    printed_train = [c for c in train_cases() if c.text != "prose"]
    assert 0 < data["logs"] <= len(printed_train) + 50  # measured on the train split (it grows; re-run then)
    total = 0
    for cause, by in data["causes"].items():
        assert cause in taxonomy, cause
        for verdict, rec in by.items():
            assert verdict in ("confident", "candidates")
            assert 0 <= rec["right"] <= rec["answered"]
            assert sum(o["n"] for o in rec["instead"]) == rec["answered"] - rec["right"]
            assert all(o["id"] in taxonomy and o["id"] != cause for o in rec["instead"])
            total += rec["answered"]
    assert total <= data["logs"]  # a log without any answer has no record


def test_report_and_json_show_the_answers_track_record():
    """A real watchdog-timeout log (quoted from a public thread): its confident collective_timeout answer comes
    with how often a confident collective_timeout was right, in the JSON (schema-valid) and the text report."""
    log = LOGS / "public_collective_timeout_basicsr.log"
    out = diagnose_paths([str(log)])
    jsonschema.validate(out, SCHEMA)
    rec = out["track_record"]
    top = out["causes"][0]["id"]
    expected = knowledge.track_record(top, out["verdict"])
    assert rec == expected and rec["cause"] == top and rec["verdict"] == out["verdict"] == "confident"
    assert rec["answered"] >= knowledge.MIN_ANSWERED and 0 <= rec["right"] <= rec["answered"]
    text = subprocess.run([sys.executable, str(ROOT / "scripts" / "diagnose.py"), str(log)], capture_output=True,
                          text=True, timeout=120).stdout
    assert f"Track record: {rec['right']} of {rec['answered']} real logs answered with this top cause" in text


def test_no_record_without_the_file_or_under_the_minimum(tmp_path):
    assert knowledge.track_record("collective_timeout", "confident", tmp_path) is None
    (tmp_path / "track_record.yaml").write_text(yaml.safe_dump(
        {"how": "x", "logs": 9, "measured": "2026-12-02",
         "causes": {"port_in_use": {"confident": {"answered": knowledge.MIN_ANSWERED - 1, "right": 1, "instead": []}},
                    "oom_one_rank": {"confident": {"answered": 6, "right": 5,
                                                   "instead": [{"id": "peer_died_first", "n": 1}]}}}}))
    knowledge._track_records_in.cache_clear()
    assert knowledge.track_record("port_in_use", "confident", tmp_path) is None
    rec = knowledge.track_record("oom_one_rank", "confident", tmp_path)
    assert rec["right"] == 5 and rec["instead"] == [{"id": "peer_died_first", "n": 1}]
    assert knowledge.track_record("oom_one_rank", "candidates", tmp_path) is None


def test_measure_leaves_each_repository_out(tmp_path):
    """The measure on a small corpus of real train cases from three repositories: every printed log is counted
    once under the answer it got, and the held-out cases of the corpus are never read."""
    repos: dict[str, list[str]] = {}
    for c in train_cases():
        if c.text != "prose":
            repos.setdefault(c.id.rsplit("-", 1)[0], []).append(c.id)
    picked = [cid for ids in sorted(repos.values(), key=len, reverse=True)[:3] for cid in ids[:2]]
    for cid in picked:
        for suffix in (".log", ".meta.yaml"):
            shutil.copy(CORPUS / f"{cid}{suffix}", tmp_path / f"{cid}{suffix}")
    assert all(split_of(cid) == "train" for cid in picked)
    recs, logs = track_record.measure(tmp_path)
    assert logs == len(picked) >= 3
    assert sum(r.answered for by in recs.values() for r in by.values()) <= logs
