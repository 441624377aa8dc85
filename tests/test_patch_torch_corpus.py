"""torch's own distributed package as a corpus: patching a copy of it with every patch must not crash,
every rewritten file must compile (the engine refuses to write one that does not), and a second pass
over the rewritten files must propose nothing. torch's files legitimately match some patches, so the
number of changes is not asserted."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from distdoctor.paths import ROOT

TORCH_DIST = Path(torch.__file__).resolve().parent / "distributed"
CLI = [sys.executable, str(ROOT / "scripts" / "patch_backend.py")]


@pytest.mark.skipif(not TORCH_DIST.is_dir(), reason="torch/distributed sources not installed")
def test_patch_copy_of_torch_distributed(tmp_path):
    copy = tmp_path / "distributed"
    shutil.copytree(TORCH_DIST, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    first = subprocess.run([*CLI, str(copy), "--json", "-j", "2"], capture_output=True, text=True, timeout=300)
    doc = json.loads(first.stdout)
    assert first.returncode == 0 and doc["errors"] == [], (first.returncode, doc["errors"][:5], first.stderr[-2000:])
    changed = [entry["path"] for entry in doc["files"]]
    for path in changed:
        source = Path(path).read_text(encoding="utf-8")
        compile(source.lstrip("\ufeff"), path, "exec", dont_inherit=True)
    if changed:
        second = subprocess.run([*CLI, "--check", "--json", "-j", "2", *changed], capture_output=True, text=True,
                                timeout=300)
        assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-2000:]
        assert json.loads(second.stdout)["changed"] == 0
