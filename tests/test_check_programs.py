"""Each hazard program under evals/programs/check_*.py misbehaves for real under torchrun (gloo, CPU) and the
checker reports it with the rule that names that hazard."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distdoctor.check.engine import check_paths
from distdoctor.runner import completed, run_torchrun

PROGRAMS = Path(__file__).resolve().parent.parent / "evals" / "programs"
RULE_OF = {"check_rank0_eval_collective.py": "DD101", "check_nan_skip.py": "DD102",
           "check_sampler_no_set_epoch.py": "DD201", "check_uneven_shards.py": "DD202",
           "check_save_all_ranks.py": "DD301", "check_irecv_not_waited.py": "DD501",
           "check_per_rank_seed.py": "DD503", "check_forward_skips_params.py": "DD504",
           "fail_ddp_generate_rank0.py": "DD101", "fail_makedirs_race.py": "DD303",
           "fail_mp_spawn_cuda_count.py": "DD403", "fail_rank0_allreduce.py": "DD101"}


@pytest.mark.parametrize("name", sorted(RULE_OF))
def test_checker_names_the_hazard(name):
    report = check_paths([str(PROGRAMS / name)])
    assert RULE_OF[name] in {f.code for f in report.findings}


def test_every_check_program_is_mapped():
    assert {p.name for p in PROGRAMS.glob("check_*.py")} <= set(RULE_OF)


def _ok_ranks(output: str) -> set[str]:
    return set(re.findall(r"DISTDOCTOR_OK rank=(\d)", output))


@pytest.mark.torchrun
@pytest.mark.parametrize("name", ["check_rank0_eval_collective.py", "check_nan_skip.py", "check_uneven_shards.py",
                                  "check_forward_skips_params.py"])
def test_hang_or_crash(name):
    result = run_torchrun(PROGRAMS / name, nproc=2, timeout=40)
    assert result.timed_out or result.returncode != 0, result.output[-2000:]
    assert _ok_ranks(result.output) != {"0", "1"}


@pytest.mark.torchrun
def test_sampler_repeats_the_order_every_epoch():
    result = run_torchrun(PROGRAMS / "check_sampler_no_set_epoch.py", nproc=2, timeout=90)
    assert completed(result, r"ORDER rank=\d epoch=2", 2), result.output[-2000:]
    orders = dict(re.findall(r"ORDER rank=0 epoch=(\d) (\[[^\]]*\])", result.output))
    assert len(orders) == 3 and len(set(orders.values())) == 1


@pytest.mark.torchrun
def test_every_rank_saving_leaves_the_last_writers_state(tmp_path):
    result = run_torchrun(PROGRAMS / "check_save_all_ranks.py", nproc=2, script_args=[str(tmp_path)], timeout=90)
    assert completed(result, "SAVED_BY", 1), result.output[-2000:]
    assert "SAVED_BY 1" in result.output  # rank 0's checkpoint holds rank 1's state


@pytest.mark.torchrun
def test_unwaited_irecv_reads_stale_data():
    result = run_torchrun(PROGRAMS / "check_irecv_not_waited.py", nproc=2, timeout=90)
    assert "RECEIVED 0" in result.output, result.output[-2000:]


@pytest.mark.torchrun
def test_per_rank_seed_trains_different_models():
    result = run_torchrun(PROGRAMS / "check_per_rank_seed.py", nproc=2, timeout=90)
    assert completed(result, r"CHECKSUM rank=\d", 2), result.output[-2000:]
    sums = dict(re.findall(r"CHECKSUM rank=(\d) (-?[\d.]+)", result.output))
    assert len(sums) == 2 and sums["0"] != sums["1"]
