"""scripts/patch_backend.py as a user runs it: exit codes, diff and report lines, --json, --list, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from distdoctor.paths import ROOT

CLI = [sys.executable, str(ROOT / "scripts" / "patch_backend.py")]
BROKEN = 'import torch.distributed as dist\ndist.init_process_group("nccl")\n'


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "myrepo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "train.py").write_text(BROKEN)
    (root / "pkg" / "clean.py").write_text("print('hello')\n")
    return root


def test_help_and_list():
    assert run("--help").returncode == 0
    listed = run("--list", "--json")
    assert listed.returncode == 0
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert rows["gloo_backend"]["cause"] == "nccl_without_cuda" and rows["gloo_backend"]["env_var"] is None
    assert set(rows["ddp_cpu_args"]) == {"id", "cause", "title", "risk", "env_var"}
    assert "gloo_backend" in run("--list").stdout


def test_dry_run_check_apply_then_idempotent(repo):
    target = repo / "pkg" / "train.py"
    dry = run(str(repo), "--dry-run", "--only", "gloo_backend")
    assert dry.returncode == 0 and target.read_text() == BROKEN
    assert '+dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")' in dry.stdout
    assert f"{target}:2 gloo_backend " in dry.stdout
    assert run(str(repo), "--check").returncode == 1 and target.read_text() == BROKEN
    applied = run(str(repo), "--only", "gloo_backend")
    assert applied.returncode == 0 and "torch.cuda.is_available()" in target.read_text()
    again = run(str(repo), "--check")
    assert again.returncode == 0 and again.stdout == ""


def test_test_files_skipped_unless_asked(repo):
    for rel in ("tests/test_dist.py", "pkg/test_train.py", "pkg/train_test.py", "conftest.py", "test/helpers.py"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(BROKEN)
    default = run(str(repo), "--dry-run", "--json", "--only", "gloo_backend")
    doc = json.loads(default.stdout)
    assert default.returncode == 0 and [f["path"] for f in doc["files"]] == [str(repo / "pkg" / "train.py")]
    assert len(doc["skipped_tests"]) == 5
    assert "skipped 5 test file(s)" in run(str(repo), "--dry-run", "--only", "gloo_backend").stderr
    included = json.loads(run(str(repo), "--dry-run", "--json", "--include-tests").stdout)
    assert included["changed"] == 6 and included["skipped_tests"] == []
    named = json.loads(run(str(repo / "pkg" / "test_train.py"), "--dry-run", "--json").stdout)
    assert named["changed"] == 1  # a file named on the command line is always patched


def test_json_output_shape(repo):
    out = run(str(repo), "--dry-run", "--json", "--skip", "ddp_cpu_args")
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert doc["changed"] == 1 and doc["errors"] == []
    (entry,) = doc["files"]
    assert entry["path"].endswith("train.py") and entry["diff"].startswith("--- a/")
    assert entry["changes"][0] == {"line": 2, "patch": "gloo_backend", "what": entry["changes"][0]["what"]}


def test_errors_per_file_rest_still_processed(repo):
    bad = repo / "pkg" / "broken_syntax.py"
    bad.write_text("def f(:\n    nccl\n")
    (repo / "pkg" / "latin1.py").write_bytes(b"# nccl caf\xe9\n")
    out = run(str(repo), "--json")
    assert out.returncode == 2
    doc = json.loads(out.stdout)
    reasons = {os.path.basename(e["path"]): e["reason"] for e in doc["errors"]}
    assert reasons["broken_syntax.py"].startswith("syntax error at line")
    assert reasons["latin1.py"].startswith("not UTF-8")
    assert doc["changed"] == 1 and "torch.cuda.is_available()" in (repo / "pkg" / "train.py").read_text()
    assert bad.read_text() == "def f(:\n    nccl\n"


@pytest.mark.parametrize("args,message", [
    (["--only", "nope", "x"], "unknown patch id(s): nope"),
    ([], "give at least one REPO_OR_FILE"),
    (["-j", "0", "x"], "-j must be at least 1"),
    (["--env-prefix", "A-B", "x"], "--env-prefix"),
])
def test_usage_errors_exit_2(args, message):
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr


def test_missing_path_and_jobs(repo, tmp_path):
    out = run(str(tmp_path / "nowhere"), str(repo), "-j", "2", "--quiet")
    assert out.returncode == 2
    assert "no such file or directory" in out.stderr
    assert "gloo_backend" in out.stdout  # the good repo was still patched
