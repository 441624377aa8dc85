"""The real-log corpus: meta validation, the frozen split, train-only retrieval, and its scoring."""

import shutil
from pathlib import Path

import pytest
import yaml

from distdoctor.corpus import CorpusError, load_corpus, split_of, train_cases
from distdoctor.diagnose import retrieval
from distdoctor.evals import corpus as corpus_eval

LOGS = Path(__file__).resolve().parent / "data" / "logs"


def _write(root: Path, case_id: str, public_log: str, **meta) -> None:
    """A corpus case made of one of tests/data/logs' public logs (real text, its URL)."""
    src = yaml.safe_load((LOGS / f"{public_log}.meta.yaml").read_text())
    shutil.copy(LOGS / f"{public_log}.log", root / f"{case_id}.log")
    body = {"source": src["source"], "cause": src["expected_cause"], "confidence": "confirmed",
            "split": split_of(case_id), "first_failure_rank": src.get("first_failure_rank"), **meta}
    (root / f"{case_id}.meta.yaml").write_text(yaml.safe_dump(body))


def _ids(split: str, n: int) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        if split_of(f"case-{i}") == split:
            out.append(f"case-{i}")
        i += 1
    return out


def test_split_rule_is_the_readme_rule():
    import hashlib
    for i in range(200):
        cid = f"owner-repo-{i}"
        assert (split_of(cid) == "heldout") == (int(hashlib.sha256(cid.encode()).hexdigest(), 16) % 10 < 3)
    share = sum(split_of(f"x-{i}") == "heldout" for i in range(2000)) / 2000
    assert 0.25 < share < 0.35


def test_bad_metas_are_refused_with_file_and_field(tmp_path):
    (train,) = _ids("train", 1)
    _write(tmp_path, train, "public_port_in_use_distkd", split="heldout")
    with pytest.raises(CorpusError, match=r"field split: 'heldout', but the frozen rule gives 'train'"):
        load_corpus(tmp_path)
    _write(tmp_path, train, "public_port_in_use_distkd", confidence="sure")
    with pytest.raises(CorpusError, match=r"field confidence"):
        load_corpus(tmp_path)
    _write(tmp_path, train, "public_port_in_use_distkd")
    errors: list[str] = []
    assert len(load_corpus(tmp_path, causes={"nccl_without_cuda"}, errors=errors)) == 0
    assert "field cause" in errors[0]
    (tmp_path / "orphan-1.log").write_text("RuntimeError: x\n")
    errors.clear()
    load_corpus(tmp_path, errors=errors)
    assert any("orphan-1.log: no .meta.yaml" in e for e in errors)


def test_retrieval_indexes_train_cases_only(tmp_path):
    train_ids, held_ids = _ids("train", 2), _ids("heldout", 2)
    for cid in train_ids + held_ids:
        _write(tmp_path, cid, "public_port_in_use_distkd")
    # a meta that lies about its split is refused, and the rule (not the meta) decides what is indexed
    got = {c.id for c in train_cases(str(tmp_path))}
    assert got == set(train_ids)
    retrieval.use_corpus(tmp_path)
    try:
        docs = {d[0] for d in retrieval.known_failures().docs}
        assert {f"corpus:{c}" for c in train_ids} <= docs
        assert not any(f"corpus:{c}" in docs for c in held_ids)
    finally:
        retrieval.use_corpus(None)


def test_scoring_reports_both_splits_and_source_kinds(tmp_path):
    (tr,), (ho,) = _ids("train", 1), _ids("heldout", 1)
    _write(tmp_path, tr, "public_port_in_use_distkd")
    _write(tmp_path, ho, "public_nccl_without_cuda_ofa")
    results = corpus_eval.score_corpus(tmp_path, include_public=False, cited=set())
    assert {r.split for r in results} == {"train", "heldout"}
    assert all(r.top1_ok and r.verdict == "confident" for r in results)
    md = corpus_eval.render_markdown(results)
    assert "| held out (never used for signatures or retrieval) | printed | 1 | 1/1 (100.0%)" in md
    assert "| heldout | github-issue | 1 |" in md and "| train | github-issue | 1 |" in md
    assert "| prose |" not in md  # no prose case, no prose row


def test_scoring_reports_figures_per_label_confidence(tmp_path):
    tr1, tr2 = _ids("train", 2)
    _write(tmp_path, tr1, "public_port_in_use_distkd")
    _write(tmp_path, tr2, "public_nccl_without_cuda_ofa", confidence="uncertain")
    results = corpus_eval.score_corpus(tmp_path, include_public=False, cited=set())
    md = corpus_eval.render_markdown(results)
    assert "### Per label confidence (printed logs)" in md
    assert "| train | confirmed | 1 | 1/1 (100.0%)" in md and "| train | uncertain | 1 | 1/1 (100.0%)" in md
    per = corpus_eval.to_json(results)["splits"]["train"]["per_confidence"]
    assert {k: v["n"] for k, v in per.items()} == {"confirmed": 1, "uncertain": 1}


def test_scoring_reports_figures_per_answer_level(tmp_path):
    """How often an answer resting on a signature (or only on a similar log, ...) was right: calibration."""
    tr1, tr2 = _ids("train", 2)
    _write(tmp_path, tr1, "public_port_in_use_distkd")
    _write(tmp_path, tr2, "public_nccl_without_cuda_ofa")
    (tmp_path / f"{tr2}.log").write_text("step 7 frobnicated the quux spindle\n")  # nothing any signature knows
    results = corpus_eval.score_corpus(tmp_path, include_public=False, cited=set())
    levels = {r.id: corpus_eval.answer_level(r) for r in results}
    assert levels[tr1] == "confident/signature" and not levels[tr2].startswith("confident/")
    md = corpus_eval.render_markdown(results)
    assert "### Per answer level (printed logs)" in md and "| train | confident/signature | 1 | 1/1 (100.0%)" in md
    per = corpus_eval.to_json(results)["splits"]["train"]["per_level"]
    assert per["confident/signature"]["top1"] == 1 and sum(v["n"] for v in per.values()) == 2


def test_text_field_is_validated_and_prose_is_scored_apart(tmp_path):
    (tr,), (ho,) = _ids("train", 1), _ids("heldout", 1)
    _write(tmp_path, tr, "public_port_in_use_distkd", text="log")
    with pytest.raises(CorpusError, match=r"field text: 'log' is not one of printed, prose"):
        load_corpus(tmp_path)
    _write(tmp_path, tr, "public_port_in_use_distkd")  # text left out: printed
    _write(tmp_path, ho, "public_nccl_without_cuda_ofa", text="prose")
    (tmp_path / f"{ho}.log").write_text("Distributed training fails on a machine without GPUs\n")  # a title
    assert {c.id: c.text for c in load_corpus(tmp_path)} == {tr: "printed", ho: "prose"}
    results = corpus_eval.score_corpus(tmp_path, include_public=False, cited=set())
    out = corpus_eval.to_json(results)
    assert out["splits"]["heldout"]["n"] == 0 and out["splits"]["heldout"]["prose"]["n"] == 1
    assert out["splits"]["train"]["n"] == 1 and out["splits"]["train"]["prose"]["n"] == 0
    md = corpus_eval.render_markdown(results)
    assert "| held out (never used for signatures or retrieval) | printed | 0 | 0/0" not in md  # "—", not a ratio
    assert "| held out (never used for signatures or retrieval) | printed | 0 | — |" in md
    assert "| held out (never used for signatures or retrieval) | prose | 1 |" in md
    assert "| heldout | github-issue |" not in md  # per-kind figures are printed logs only
    text = corpus_eval.render_text(results)
    assert "heldout       prose      1" in text and "heldout       printed    0" in text


def test_train_only_never_reads_a_held_out_file(tmp_path, capsys):
    (tr,), (ho,) = _ids("train", 1), _ids("heldout", 1)
    _write(tmp_path, tr, "public_port_in_use_distkd")
    (tmp_path / f"{ho}.meta.yaml").write_text("source: [not yaml\n")  # read, it would be refused
    (tmp_path / f"{ho}.log").write_bytes(b"\xff\xfe not utf-8\n")
    errors: list[str] = []
    assert [c.id for c in load_corpus(tmp_path, errors=errors, split="train")] == [tr] and errors == []
    load_corpus(tmp_path, errors=errors)
    assert errors and all(ho in e for e in errors)  # the whole folder: the held-out file was read
    results = corpus_eval.score_corpus(tmp_path, include_public=False, cited=set(), train_only=True)
    assert [(r.id, r.split) for r in results] == [(tr, "train")]
    from distdoctor.evals.cli import main
    md = tmp_path / "RESULTS.md"
    assert main(["--json", "-q", "--train-only", "--corpus", str(tmp_path), "--results", str(md)]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert out["corpus"]["refused"] == [] and out["corpus"]["splits"]["train"]["n"] == 1
    assert "heldout" not in out["corpus"]["splits"] and not md.exists()  # RESULTS.md needs both splits
    assert main(["--train-only", "--no-corpus"]) == 2


def test_public_dev_logs_stay_right():
    results = [corpus_eval.diagnose_case(c) for c in corpus_eval.public_logs()]
    assert len(results) >= 40
    s = corpus_eval.summary(results)
    assert s["top1"] == s["n"] and s["ranks_right"] == s["ranks"]


def test_run_evals_json_and_results_carry_the_corpus(tmp_path, capsys):
    from distdoctor.evals.cli import main
    results = tmp_path / "RESULTS.md"
    assert main(["--json", "-q", "--corpus", str(tmp_path / "none"), "--results", str(results)]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert out["corpus"]["splits"]["dev"]["n"] >= 40
    assert "## Real-log corpus" in results.read_text()
    from distdoctor.diagnose import retrieval
    assert retrieval._CORPUS_ROOT[0] is None  # --corpus does not outlive the run (retrieval indexes evals/corpus/)


def test_a_held_out_case_whose_thread_the_knowledge_base_cites_is_not_counted_as_unseen(tmp_path):
    """public_nccl_without_cuda_ofa's thread is tests/data/logs' own (signatures were written from it): as a
    held-out corpus case it is scored apart, in `heldout_cited`, never in the held-out figures."""
    (ho,) = _ids("heldout", 1)
    _write(tmp_path, ho, "public_nccl_without_cuda_ofa")
    source = yaml.safe_load((tmp_path / f"{ho}.meta.yaml").read_text())["source"]
    assert corpus_eval.normal_url(source + "#issuecomment-1") in corpus_eval.cited_sources()
    results = corpus_eval.score_corpus(tmp_path, include_public=False)
    assert [r.split for r in results] == ["heldout_cited"]
    out = corpus_eval.to_json(results)
    assert "heldout" not in out["splits"] and out["splits"]["heldout_cited"]["n"] == 1
    assert "| held out, but its thread is cited" in corpus_eval.render_markdown(results)


def test_held_out_cases_someone_saw_are_scored_apart() -> None:
    """evals/corpus/SEEN_HELDOUT.yaml lists held-out cases a developer saw: each is a held-out case of the corpus,
    and the eval moves it to `heldout_cited`, outside the held-out figures."""
    root = Path(__file__).resolve().parent.parent
    seen_file = root / "evals" / "corpus" / "SEEN_HELDOUT.yaml"
    seen = {corpus_eval.normal_url(e["source"]) for e in yaml.safe_load(seen_file.read_text(encoding="utf-8"))}
    cases = load_corpus(root / "evals" / "corpus")
    held = {corpus_eval.normal_url(c.source) for c in cases if c.split == "heldout"}
    assert seen and seen <= held, seen - held
    marked = corpus_eval.mark_cited(cases, corpus_eval.cited_sources(root))
    assert {c.split for c in marked if corpus_eval.normal_url(c.source) in seen} == {"heldout_cited"}
