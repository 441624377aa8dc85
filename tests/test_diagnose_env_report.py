"""An environment report pasted beside a log (torch.utils.collect_env's, tests/data/env/) changes no answer: its
words ("CUDA", "driver", "NCCL", "version") are the set-up, not the failure, and retrieval leaves them out."""

import pytest

from distdoctor.diagnose import diagnose_paths
from distdoctor.diagnose.env_report import without_reports
from distdoctor.evals.pasted import answer
from distdoctor.paths import ROOT

LOGS = ROOT / "tests" / "data" / "logs"
REPORT = (ROOT / "tests" / "data" / "env" / "collect_env_cpu.txt").read_text(encoding="utf-8")

# real logs whose answer the report changed before (top cause, or the alternatives after it)
CASES = ["gen_mp_spawn_zero_gpus", "gen_single_process_silent", "public_local_rank_device_pick",
         "public_download_race_automodel", "gen_detail_debug_segfault_faulthandler", "gpu_ddp_model_on_cpu"]


@pytest.mark.parametrize("name", CASES)
def test_report_after_the_log_changes_no_answer(tmp_path, name):
    text = (LOGS / f"{name}.log").read_bytes().decode("utf-8")
    path = tmp_path / "issue.txt"
    path.write_text(text.rstrip("\n") + "\n\n" + REPORT, encoding="utf-8")
    assert answer(diagnose_paths([str(path)])) == answer(diagnose_paths([str(LOGS / f"{name}.log")]))


def test_report_before_the_log_keeps_causes_and_rank(tmp_path):
    name = "gen_chain_oom_rank1"
    path = tmp_path / "issue.txt"
    path.write_text(REPORT + "\n" + (LOGS / f"{name}.log").read_text(encoding="utf-8"), encoding="utf-8")
    got, plain = answer(diagnose_paths([str(path)])), answer(diagnose_paths([str(LOGS / f"{name}.log")]))
    assert got[:3] == plain[:3]  # the line moves down by the report's length
    assert got[3] == plain[3] + len(REPORT.splitlines()) + 1


def test_without_reports_keeps_the_failure():
    lines = REPORT.splitlines() + ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>',
                                   "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error"]
    assert without_reports(lines) == lines[-3:]
    assert without_reports(["PyTorch version: 2.1.0+cu121", "Is CUDA available: True",
                            "[rank0]: RuntimeError: x", "CUDA used to build PyTorch: 12.1"]) == \
        ["[rank0]: RuntimeError: x", "CUDA used to build PyTorch: 12.1"]  # a report ends at the first log line
    assert without_reports(["CUDA used to build PyTorch: 12.1", "x"]) == ["CUDA used to build PyTorch: 12.1", "x"]
