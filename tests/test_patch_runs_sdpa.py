"""sdpa_force proven by running: flash-attention paths fail on CPU for real, patched and forced they train (the
forced run of the patched program is the closed loop's rerun, tests/test_evals_e2e.py: same source, both ranks
finish with one checksum; it is not run a second time here)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distdoctor.evals import e2e
from distdoctor.patching.base import PatchOptions
from distdoctor.patching.engine import patch_source
from distdoctor.paths import ROOT, patch_module
from distdoctor.runner import run_torchrun

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
    # with the closed loop's prefix, the patch gives the very source that loop reruns forced (DISTDOCTOR_FORCE_SDPA=1)
    ours = patch_source(script.read_text(), [sdpa], PatchOptions(env_prefix=e2e.ENV_PREFIX), str(script))
    assert ours.new_source == e2e.patched_source(f"evals/programs/{program}")
    assert e2e.switches_for(["sdpa_force"]) == {"DISTDOCTOR_FORCE_SDPA": "1"}
