"""Dry run over the installed torch/distributed: no crash, every proposal compiles, nothing proposed twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import patches
from distdoctor.patching.engine import patch_source
from distdoctor.paths import ROOT

TORCH_DIST = Path(torch.__file__).resolve().parent / "distributed"


@pytest.mark.skipif(not TORCH_DIST.is_dir(), reason="torch/distributed sources not installed")
def test_dry_run_over_torch_distributed():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "patch_backend.py"), str(TORCH_DIST),
                          "--dry-run", "--json", "-j", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 2), out.stderr[-2000:]
    doc = json.loads(out.stdout)
    # torch ships a few files that do not parse as text on purpose? none expected: report them if any
    assert doc["errors"] == [], doc["errors"][:5]
    for entry in doc["files"]:
        path = entry["path"]
        source = Path(path).read_text(encoding="utf-8")
        result = patch_source(source, patches.all_patches(), path=path)
        assert result.changes and [c.line for c in result.changes] == [c["line"] for c in entry["changes"]]
        compile(result.new_source.lstrip("\ufeff"), path, "exec", dont_inherit=True)
        second = patch_source(result.new_source, patches.all_patches(), path=path)
        assert second.changes == [], f"{os.path.relpath(path, TORCH_DIST)}: second pass proposes {second.changes}"
