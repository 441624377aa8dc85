"""Value flow the way real code writes it, proven by running: fixture programs that build devices and
pass ranks through set-up helpers, env dicts, argparse defaults, config fields and calls fail on 2 CPU gloo
ranks (where they can fail without a GPU), and after one run of every patch both ranks finish in step."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from distdoctor.patching.base import PatchOptions
from distdoctor.patching.engine import patch_source
from distdoctor.runner import finished_ranks, run_torchrun, succeeded

pytestmark = pytest.mark.torchrun

FIXTURES = Path(__file__).parent / "fixtures" / "patches"
CASES = [
    # fixture, real failure text of the unpatched run on a CPU (None: the binding is wrong, the run is not)
    ("torch_device_cpu/setup_helper_device", "Distributed package doesn't have NCCL built in"),
    ("torch_device_cpu/device_string_forms", "Torch not compiled with CUDA enabled"),
    ("torch_device_cpu/accelerator_api", "device() received an invalid combination of arguments"),
    ("local_rank_device/env_dict_call_graph", "Cannot access accelerator device when none is available"),
    ("local_rank_device/environ_copy_argparse_config", None),
    ("cuda_calls_cpu/train_loop_bare_cuda", "Torch not compiled with CUDA enabled"),
    ("gloo_backend/platform_chain_then_set_device", "Distributed package doesn't have NCCL built in"),
    ("gloo_backend/platform_ifexp_backend", "Distributed package doesn't have NCCL built in"),
    ("int_device/device_keyword_any_call", "Cannot access accelerator device when none is available"),
    ("gloo_backend/setup_beside_try", "module 'torch._C' has no attribute '_cuda_setDevice'"),
    ("cuda_requirements/count_name_modulo", "ZeroDivisionError: integer modulo by zero"),
    ("gloo_backend/default_backend_device_id", "Expected a cuda device, but got: cpu"),
    ("gloo_backend/launcher_backend_param", "Distributed package doesn't have NCCL built in"),
    ("cuda_calls_cpu/bare_set_device", "module 'torch._C' has no attribute '_cuda_setDevice'"),
    ("int_device/device_modulo_count", "ZeroDivisionError: integer modulo by zero"),
    ("cuda_calls_cpu/legacy_cuda_tensor_types", "type torch.cuda.FloatTensor not available"),
]


@pytest.mark.parametrize("fixture,failure", CASES, ids=[c[0] for c in CASES])
def test_patched_program_trains_on_two_gloo_ranks(tmp_path: Path, fixture: str, failure: str | None) -> None:
    script = tmp_path / "train.py"
    shutil.copy(FIXTURES / f"{fixture}.in.py", script)
    if failure is not None:
        before = run_torchrun(script, nproc=2, timeout=90, cwd=tmp_path, whole_lines=True)
        assert not before.timed_out and not succeeded(before)
        assert failure in before.output, before.output[-3000:]

    result = patch_source(script.read_text(), None, PatchOptions(), str(script))
    assert result.changes
    script.write_text(result.new_source)
    assert patch_source(result.new_source, None, PatchOptions(), str(script)).changes == []
    after = run_torchrun(script, nproc=2, timeout=90, cwd=tmp_path)
    assert succeeded(after), after.output[-3000:]
    sums = finished_ranks(after.output)
    assert sorted(sums) == [0, 1] and len(set(sums.values())) == 1, sums
