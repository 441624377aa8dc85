"""scripts/check_repo.py as a linter: output formats, exit codes, suppressions, selection, bad files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_repo.py"
BAD = "import torch.distributed as dist\nrank = dist.get_rank()\nif rank == 0:\n    dist.barrier()\n"
GOOD = "import torch.distributed as dist\ndist.barrier()\n"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def test_text_format_and_exit_codes(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text(GOOD)
    proc = run(str(tmp_path / "bad.py"))
    assert proc.returncode == 1
    assert proc.stdout.startswith(f"{tmp_path / 'bad.py'}:4:5: DD101 dist.barrier runs on some ranks only")
    assert "references/hangs-and-collectives.md#rank_conditional_collective" in proc.stdout
    assert run(str(tmp_path / "good.py")).returncode == 0
    assert run(str(tmp_path / "bad.py"), "--exit-zero").returncode == 0


def test_json_sarif_github(tmp_path):
    (tmp_path / "bad.py").write_text(BAD)
    doc = json.loads(run(str(tmp_path), "--format", "json").stdout)
    assert doc == [{"path": str(tmp_path / "bad.py"), "line": 4, "col": 5, "code": "DD101",
                    "cause": "rank_conditional_collective", "severity": "error", "message": doc[0]["message"],
                    "reference": "references/hangs-and-collectives.md#rank_conditional_collective"}]
    sarif = json.loads(run(str(tmp_path), "--format", "sarif").stdout)
    assert sarif["version"] == "2.1.0"
    result = sarif["runs"][0]["results"][0]
    assert result["ruleId"] == "DD101" and result["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]} >= {"DD101", "DD504"}
    gh = run(str(tmp_path), "--format", "github").stdout
    assert gh.startswith(f"::error title=distdoctor (DD101),file={tmp_path / 'bad.py'},line=4,col=5::DD101 ")


def test_noqa_and_file_suppression(tmp_path):
    (tmp_path / "a.py").write_text(BAD.replace("dist.barrier()\n", "dist.barrier()  # noqa: DD101\n"))
    (tmp_path / "b.py").write_text(BAD.replace("dist.barrier()\n", "dist.barrier()  # noqa: DD999\n"))
    (tmp_path / "c.py").write_text("# distdoctor: noqa: DD101\n" + BAD)
    (tmp_path / "d.py").write_text(BAD.replace("dist.barrier()\n", "dist.barrier()  # noqa\n"))
    doc = json.loads(run(str(tmp_path), "--format", "json").stdout)
    assert [Path(f["path"]).name for f in doc] == ["b.py"]


def test_select_and_ignore(tmp_path):
    (tmp_path / "bad.py").write_text(BAD + "import torch\nstate = torch.load('ckpt.pt')\n")
    codes = lambda *a: [f["code"] for f in json.loads(run(str(tmp_path), "--format", "json", *a).stdout)]  # noqa: E731
    assert codes() == ["DD101", "DD402"]
    assert codes("--select", "DD4") == ["DD402"]
    assert codes("--ignore", "DD101") == ["DD402"]
    proc = run(str(tmp_path), "--select", "XX1")
    assert proc.returncode == 2 and "unknown rule code 'XX1'" in proc.stderr


def test_bad_files_are_reported_and_skipped(tmp_path):
    (tmp_path / "syntax.py").write_text("def f(rank:\n")  # files without a prefilter word are not parsed
    (tmp_path / "latin1.py").write_bytes(b"# caf\xe9\nimport torch.distributed\n")
    (tmp_path / "binary.py").write_bytes(b"\x00\x01rank")
    (tmp_path / "bad.py").write_text(BAD)
    proc = run(str(tmp_path))
    assert proc.returncode == 2
    lines = sorted(proc.stderr.splitlines()[:-1])
    assert len(lines) == 3
    assert "binary.py: error: binary file" in lines[0] and "latin1.py: error: not UTF-8" in lines[1]
    assert "syntax.py: error: syntax error at line 1" in lines[2]
    assert "bad.py:4:5: DD101" in proc.stdout  # the good files are still checked


def test_no_files_is_clean_for_pre_commit():
    proc = run()
    assert proc.returncode == 0 and proc.stdout == ""
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "python -m distdoctor.check" in hooks and "types: [python]" in hooks


def test_progress_only_when_asked(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    assert "[check] 1/1 files" in run(str(tmp_path), "--progress").stderr
    assert "1/1 files" not in run(str(tmp_path)).stderr


def test_symlinks_are_skipped_not_errors(tmp_path):
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "link.py").symlink_to(tmp_path / "good.py")
    proc = run(str(tmp_path))
    assert proc.returncode == 0 and "link.py: skipped: symbolic link, not followed" in proc.stderr
