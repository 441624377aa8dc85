"""The pure parts of distdoctor.evals.first_seen: batch commits, added cases, train filtering, origins."""

import subprocess
from pathlib import Path

from distdoctor.evals import first_seen as fs


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    corpus = repo / "evals" / "corpus"
    corpus.mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@t")
    _git(repo, "config", "user.name", "t")
    (repo / "README.md").write_text("x\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "init")
    for cid, split, text in (("a-1", "train", None), ("b-2", "heldout", None), ("c-3", "train", "prose")):
        (corpus / f"{cid}.log").write_text("RuntimeError: boom\n")
        meta = f"source: x\ncause: port_in_use  # note\nconfidence: likely\nsplit: {split}\n"
        (corpus / f"{cid}.meta.yaml").write_text(meta + (f"text: {text}\n" if text else ""))
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "batch 1")
    (corpus / "a-1.meta.yaml").write_text("source: x\ncause: port_in_use\nconfidence: confirmed\nsplit: train\n")
    _git(repo, "commit", "-qam", "edit only")
    (corpus / "d-4.log").write_text("x\n")
    (corpus / "d-4.meta.yaml").write_text("cause: oom_one_rank\nsplit: train\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "batch 2")
    return repo


def test_batches_and_train_cases(tmp_path):
    repo = str(_repo(tmp_path))
    commits = fs.batch_commits(repo)
    assert len(commits) == 2  # the edit-only commit added no case
    assert fs.added_cases(repo, commits[0]) == ["a-1", "b-2", "c-3"]
    assert fs.train_cases(repo, commits[0]) == [{"id": "a-1", "cause": "port_in_use", "confidence": "likely"}]
    assert fs.train_cases(repo, commits[1]) == [{"id": "d-4", "cause": "oom_one_rank", "confidence": None}]


def test_split_and_fields():
    assert fs.split_of("cause: x\nsplit: 'heldout'\n") == "heldout"
    assert fs.split_of("cause: x\n") is None
    assert fs.field("cause: nccl_p2p_broken   # c\n", "cause") == "nccl_p2p_broken"


def test_origin_and_summary():
    tmpl = "RuntimeError with the same message template as a known port_in_use failure ({}: 'Address')"
    assert fs.origin([{"kind": "structural", "proves": tmpl.format("corpus:x-1")}]) == "template:corpus"
    assert fs.origin([{"kind": "structural", "proves": tmpl.format("https://github.com/o/r/issues/1")}]) \
        == "template:corpus"
    assert fs.origin([{"kind": "structural", "proves": tmpl.format("references/a.md#port_in_use")}]) == "template:entry"
    assert fs.origin([{"kind": "structural", "proves": "rank 0 ran ALLREDUCE while rank 1 ran BROADCAST"}]) \
        == "reader:collective_mismatch"
    assert fs.origin([{"kind": "signature", "proves": "x"}]) is None
    rows = [{"id": "a", "level": "structural", "origin": "template:corpus", "confidence": "likely", "verdict": "confident",
             "right": True}, {"id": "b", "level": "similar", "origin": None, "confidence": "likely", "verdict": "candidates",
                              "right": False}, {"id": "c", "error": "x"}, {"id": "d", "verdict": None, "level": None}]
    s = fs.summarize(rows)
    assert s["errors"] == 1 and s["pre_levels_dropped"] == 1 and s["table"]["origin=template:corpus"] == "1/1 (100%)"
    assert s["table"]["level=similar"] == "0/1 (0%)"
