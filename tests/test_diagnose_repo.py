"""`diagnose LOG --repo PATH`: the checker's findings on the job's code weighed with real logs of our programs
(distdoctor/diagnose/code_evidence.py has the rule)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from distdoctor.diagnose import code_evidence
from distdoctor.diagnose.engine import diagnose_paths
from distdoctor.diagnose.matcher import matcher_for
from distdoctor.paths import ROOT
from distdoctor.runner import run, torchrun_cmd

LOGS = ROOT / "tests" / "data" / "logs"
REPO_LOGS = ROOT / "tests" / "data" / "repo_logs"
PROGRAMS = ROOT / "evals" / "programs"


def _with_repo(log: Path, program: str) -> tuple[dict, dict]:
    code = code_evidence.check([str(PROGRAMS / program)])
    return diagnose_paths([str(log)]), diagnose_paths([str(log)], code=code)


def test_symptom_only_log_takes_the_codes_cause_with_its_line() -> None:
    # torchrun --log-dir console: only the agent's summary (a candidate peer_died_first); the code shows the
    # all_reduce under `if rank == 0`
    alone, both = _with_repo(LOGS / "gen_rank0_allreduce_logdir.log", "fail_rank0_allreduce.py")
    assert alone["verdict"] == "candidates" and alone["causes"][0]["id"] != "rank_conditional_collective"
    assert both["verdict"] == "confident"
    top = both["causes"][0]
    assert top["id"] == "rank_conditional_collective" and top["role"] == "top" and top["level"] == "code"
    ev = top["evidence"][0]
    assert ev["kind"] == "code" and ev["file"].endswith("fail_rank0_allreduce.py") and ev["line"] == 27
    assert "all_reduce" in ev["text"] and "DD101" in ev["proves"]
    assert both["code"]["promoted"] == "rank_conditional_collective"
    assert both["code"]["over"] == alone["causes"][0]["id"]
    assert both["entry"] == top["entry"] and both["fix"]


def test_confident_cause_of_another_kind_is_never_displaced() -> None:
    # a structural store_barrier_world_size beside a DD101 in the same program: the log's top stands
    alone, both = _with_repo(LOGS / "gen_store_barrier_oversized.log", "fail_store_wait.py")
    assert alone["verdict"] == both["verdict"] == "confident"
    assert both["causes"][0]["id"] == alone["causes"][0]["id"] == "store_barrier_world_size"
    assert both["code"]["promoted"] is None
    assert [f["role"] for f in both["code"]["findings"]] == ["unrelated"]


def test_symptom_top_beside_the_ranks_own_error_stays() -> None:
    # peer_died_first with rank 1's own RuntimeError shown: the DD101 elsewhere in the file is only "also"
    alone, both = _with_repo(LOGS / "gen_store_wait_peer_failed.log", "fail_store_wait.py")
    assert both["causes"][0]["id"] == alone["causes"][0]["id"] == "peer_died_first"
    assert [f["role"] for f in both["code"]["findings"]] == ["also"]


def test_code_that_did_not_run_is_not_weighed() -> None:
    # gen_sigkill_rank1's log names fail_sigkill.py: another program's findings are not its code
    alone, both = _with_repo(LOGS / "gen_sigkill_rank1.log", "fail_rank0_allreduce.py")
    assert both["causes"][0]["id"] == alone["causes"][0]["id"] == "peer_died_first"
    assert both["code"]["promoted"] is None and "not the code that ran" in both["code"]["rule"]
    assert {f["role"] for f in both["code"]["findings"]} == {"unrelated"}


def test_a_quiet_log_gets_the_codes_causes_as_candidates() -> None:
    alone, both = _with_repo(REPO_LOGS / "check_save_all_ranks.log", "check_save_all_ranks.py")
    assert alone["causes"] == []
    assert both["verdict"] == "candidates" and both["causes"][0]["id"] == "checkpoint_all_ranks"
    assert both["patch"] is None and both["fix"] is None


def test_promoted_patch_needs_its_precondition_on_the_code_line() -> None:
    entries = matcher_for(None).entries
    code = code_evidence.check([str(PROGRAMS / "device_global_rank.py")])
    found = [f for f in code["findings"] if f["cause"] == "local_rank_device"]
    cause = code_evidence._new_cause("local_rank_device", entries, "top")
    code_evidence._gate_patch(cause, found)
    assert cause["patch"] == "local_rank_device" and cause["patch_ready"]
    assert "device_global_rank.py" in cause["patch_note"]
    other = code_evidence._new_cause("local_rank_device", entries, "top")
    code_evidence._gate_patch(other, [dict(f, text="model.cuda()") for f in found])
    assert not other["patch_ready"] and other["patch_note"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "distdoctor", "diagnose", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_bad_repo_path_is_one_line_and_exit_2() -> None:
    p = _cli(str(LOGS / "gen_rank0_allreduce.log"), "--repo", str(ROOT / "README.md"), "--quiet")
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "--repo" in p.stderr


def test_cli_json_with_repo_matches_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    p = _cli(str(LOGS / "gen_rank0_allreduce_logdir.log"), "--repo", str(PROGRAMS / "fail_rank0_allreduce.py"),
             "--json", "--quiet")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    jsonschema.validate(out, json.loads((ROOT / "schemas" / "diagnosis.schema.json").read_text()))
    assert out["code"]["findings"][0]["role"] == "top"
    text = _cli(str(LOGS / "gen_rank0_allreduce_logdir.log"), "--repo", str(PROGRAMS / "fail_rank0_allreduce.py"),
                "--quiet").stdout
    assert "Top cause: rank_conditional_collective" in text and "fail_rank0_allreduce.py:27" in text


def test_end_to_end_torchrun_log_dir_then_repo() -> None:
    """A real run: rank 0 alone all-reduces (5 s gloo timeout) under torchrun --log-dir, so the console holds only
    the agent's summary; diagnosed with --repo, the program's `if rank == 0` collective is the cause."""
    with tempfile.TemporaryDirectory() as tmp:
        program = str(PROGRAMS / "fail_rank0_allreduce.py")
        cmd = torchrun_cmd(program, 2, launcher_args=["--log-dir", str(Path(tmp) / "logs"), "--redirects", "3"])
        result = run(cmd, timeout=90, cwd=ROOT)
        assert "ChildFailedError" in result.output, result.output[-2000:]
        console = Path(tmp) / "console.log"
        console.write_text(result.output)
        p = _cli(str(console), "--repo", program, "--json", "--quiet")
    out = json.loads(p.stdout)
    top = out["causes"][0]
    assert out["verdict"] == "confident" and top["id"] == "rank_conditional_collective"
    assert top["evidence"][0]["file"] == program and top["evidence"][0]["line"] == 27


def test_cli_progress_on_a_large_repo_unless_quiet(tmp_path: Path) -> None:
    for i in range(60):
        (tmp_path / f"m{i}.py").write_text(f"import torch.distributed as dist\nX = {i}\n")
    log = str(LOGS / "gen_rank0_allreduce_logdir.log")
    loud = _cli(log, "--repo", str(tmp_path))
    assert "checking the code, 60/60 files" in loud.stderr
    assert "Code (--repo" in loud.stdout and "60 file(s) checked, 0 finding(s)" in loud.stdout
    (tmp_path / "m60.py").write_text("X = 60\n")  # a new file: not the cached answer
    assert "checking the code" not in _cli(log, "--repo", str(tmp_path), "--quiet").stderr


def _cli_stdin(data: bytes, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "distdoctor", "diagnose", "-", *args], cwd=ROOT, input=data,
                          capture_output=True, timeout=120)


def _answer(out: dict) -> tuple:
    """What --repo decides, without the log's name: causes, verdict, the code section."""
    causes = [(c["id"], c["role"], c["level"], [(e["kind"], e.get("line"), e.get("proves")) for e in c["evidence"]])
              for c in out["causes"]]
    return causes, out["verdict"], out["code"]


@pytest.mark.parametrize("log, program", [
    ("gen_sigkill_rank1.log", "fail_rank0_allreduce.py"),  # names fail_sigkill.py: not the code that ran
    ("gen_rank0_allreduce_logdir.log", "fail_rank0_allreduce.py"),  # the code's cause takes the top
])
def test_stdin_and_gz_logs_get_the_same_code_evidence_as_the_file(tmp_path: Path, log: str, program: str) -> None:
    # the files the log names are collected by the one scan: a log read once (stdin, .gz) is weighed as the file is
    import gzip

    repo = ("--repo", str(PROGRAMS / program), "--json", "--quiet")
    data = (LOGS / log).read_bytes()
    plain = _cli(str(LOGS / log), *repo)
    assert plain.returncode == 0, plain.stderr
    gz = tmp_path / (log + ".gz")
    gz.write_bytes(gzip.compress(data))
    want = _answer(json.loads(plain.stdout))
    assert _answer(json.loads(_cli(str(gz), *repo).stdout)) == want
    assert _answer(json.loads(_cli_stdin(data, *repo).stdout)) == want
    assert _answer(json.loads(_cli_stdin(gzip.compress(data), *repo).stdout)) == want


def test_named_files_come_from_the_scan_not_a_second_reading() -> None:
    # the scan's own set: frames and torchrun's summary, installed packages aside
    from distdoctor.diagnose import engine
    from distdoctor.diagnose.sources import expand

    calls = []

    def opened(src):
        def open_once():
            calls.append(src.name)
            return src.open()
        return replace(src, open=open_once)

    sources = [opened(s) for s in expand([str(LOGS / "gen_sigkill_rank1.log")], [])]
    out = engine.diagnose_sources(sources, code=code_evidence.check([str(PROGRAMS / "fail_rank0_allreduce.py")]))
    assert len(calls) == 1 and "not the code that ran" in out["code"]["rule"]
    assert "fail_sigkill.py" in out["code"]["rule"]
    named: set[str] = set()
    code_evidence.add_named(b'  File "/usr/lib/python3.11/site-packages/torch/x.py", line 3, in f', named)
    code_evidence.add_named(b'  File "/job/train.py", line 9, in main  train.py FAILED', named)
    assert named == {"/job/train.py", "train.py"}
