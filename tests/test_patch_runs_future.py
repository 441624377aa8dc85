"""gloo_future_shim proven by running: the ZeRO-2 style optimizer fails on gloo, patched it trains on both ranks (the
run of the patched program is the closed loop's rerun, tests/test_evals_e2e.py: same source, both ranks finish
with one checksum; it is not run a second time here)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distdoctor.evals import e2e
from distdoctor.patching.base import PatchOptions
from distdoctor.patching.engine import patch_source
from distdoctor.paths import ROOT, patch_module
from distdoctor.runner import finished_ranks, run_torchrun

shim = patch_module("gloo_future_shim")

PROGRAM = ROOT / "evals" / "programs" / "future_zero2_optimizer.py"


@pytest.mark.torchrun
def test_get_future_fails_on_gloo_then_patched_program_trains(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    shutil.copy(PROGRAM, script)
    before = run_torchrun(script, nproc=2, timeout=60, whole_lines=True)
    assert not before.ok, before.output[-2000:]
    assert "RuntimeError: Work::getFuture not implemented." in before.output
    assert not finished_ranks(before.output)

    result = patch_source(script.read_text(), [shim], PatchOptions(), str(script))
    assert {c.patch for c in result.changes} == {"gloo_future_shim"}
    assert len(result.changes) == 6  # optimizer + multi-line, dict comprehension, Work variable, isend, irecv
    assert result.new_source.count("def _distdoctor_future(") == 1
    assert "all_gather_into_tensor(full, new_slice, async_op=True)\n                .get_future()" in result.new_source
    assert result.new_source == e2e.patched_source("evals/programs/future_zero2_optimizer.py")
