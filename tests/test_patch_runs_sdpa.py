"""sdpa_force proven by running: flash-attention paths fail on CPU for real, patched and forced they train."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distdoctor.patching.base import PatchOptions
from distdoctor.patching.engine import patch_source
from distdoctor.paths import ROOT, patch_module
from distdoctor.runner import finished_ranks, run_torchrun, succeeded

sdpa = patch_module("sdpa_force")

PROGRAMS = ROOT / "evals" / "programs"
CASES = [
    ("sdpa_flash_import.py", "ModuleNotFoundError: No module named 'flash_attn'"),
    ("sdpa_cuda_kernel.py", "NotImplementedError: Could not run 'aten::_scaled_dot_product_flash_attention' "
                            "with arguments from the 'CPU' backend"),
]


@pytest.mark.torchrun
@pytest.mark.parametrize("program,error", CASES, ids=[c[0] for c in CASES])
def test_flash_path_fails_then_forced_sdpa_trains(tmp_path: Path, program: str, error: str) -> None:
    script = tmp_path / program
    shutil.copy(PROGRAMS / program, script)
    before = run_torchrun(script, nproc=2, timeout=60, whole_lines=True)
    assert not before.ok
    assert error in before.output, before.output[-2000:]

    result = patch_source(script.read_text(), [sdpa], PatchOptions(env_prefix="TINYGPT"), str(script))
    assert result.changes and {c.patch for c in result.changes} == {"sdpa_force"}
    assert 'os.environ.get("TINYGPT_FORCE_SDPA", "")' in result.new_source
    script.write_text(result.new_source)

    after = run_torchrun(script, nproc=2, timeout=60, env={"TINYGPT_FORCE_SDPA": "1"})
    assert succeeded(after), after.output[-3000:]
    sums = finished_ranks(after.output)
    assert sorted(sums) == [0, 1], after.output[-2000:]
    assert sums[0] == sums[1]
