"""terminal_hangup: torchrun stops every worker when its session hangs up (SIGHUP), nohup or not.

Pinned on a live run here (nohup torchrun, then SIGHUP to the launcher) and on the train split of the real-log
corpus; held-out cases are never read (their split is the only field looked at).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from distdoctor import knowledge, paths
from distdoctor.diagnose import diagnose_text
from distdoctor.diagnose.retrieval import excluding
from distdoctor.runner import run, torchrun_cmd

CORPUS = paths.ROOT / "evals" / "corpus"
ENTRY = paths.ROOT / "references" / "launch-and-devices.md"

SLEEPER = """import os, sys, time
out = sys.argv[1]
open(os.path.join(out, "ready_" + os.environ["RANK"]), "w").close()
time.sleep(120)
"""


def _train_cases(cause: str) -> list[str]:
    out = []
    for meta in sorted(CORPUS.glob("*.meta.yaml")):
        info = yaml.safe_load(meta.read_text(encoding="utf-8"))
        if info.get("split") == "train" and info.get("cause") == cause and info.get("text", "printed") == "printed":
            out.append(meta.name[:-len(".meta.yaml")])
    return out


def _signatures() -> list[knowledge.Signature]:
    entry = next(e for e in knowledge.parse_file(ENTRY) if e.cause == "terminal_hangup")
    return list(entry.signatures)


def test_live_nohup_torchrun_dies_on_sighup(tmp_path: Path):
    """nohup ignores SIGHUP, but torchrun's agent installs its own handler: the hang-up still stops the job."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    cmd = shlex.join(torchrun_cmd(tmp_path / "sleeper.py", 2, [str(tmp_path)], ["--master_port", "0"]))
    script = (f"nohup {cmd} > {tmp_path}/out.txt 2>&1 & p=$!; "
              f"for i in $(seq 900); do [ -e {tmp_path}/ready_0 ] && [ -e {tmp_path}/ready_1 ] && break; sleep 0.1; done; "
              f"kill -HUP $p; wait $p; echo launcher_exit=$?; cat {tmp_path}/out.txt")
    result = run(["bash", "-c", script], timeout=120)
    assert not result.timed_out, result.output[-2000:]
    assert "launcher_exit=0" not in result.output
    assert "got signal: 1" in result.output, result.output[-2000:]
    diagnosis = diagnose_text(result.output, name="live_sighup.log")
    assert diagnosis["causes"][0]["id"] == "terminal_hangup", [c["id"] for c in diagnosis["causes"][:3]]


@pytest.mark.parametrize("case", _train_cases("terminal_hangup"))
def test_train_corpus_case(case: str):
    text = (CORPUS / f"{case}.log").read_text(encoding="utf-8", errors="replace")
    with excluding({f"corpus:{case}"}):  # its own log out of retrieval, as the eval does
        result = diagnose_text(text, name=f"{case}.log")
    assert result["causes"][0]["id"] == "terminal_hangup", [c["id"] for c in result["causes"][:3]]


def test_train_cases_exist():
    assert len(_train_cases("terminal_hangup")) >= 5


@pytest.mark.parametrize("line", [
    # torch >= 2.4 names the signal (https://github.com/hiyouga/LlamaFactory/issues/5297)
    "W0828 22:53:47.001000 139822188226368 torch/distributed/elastic/agent/server/api.py:688] "
    "Received Signals.SIGHUP death signal, shutting down workers",
    # older torch prints its number (https://github.com/JingyunLiang/VRT/issues/47)
    "WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 17871 got signal: 1",
])
def test_signatures_match_hangup_lines(line: str):
    assert any(s.compiled.search(line) for s in _signatures())


@pytest.mark.parametrize("line", [
    # a scheduler's or the agent's SIGTERM is another story
    # (https://github.com/determined-ai/determined/issues/8915)
    "[2024-02-27T21:35:32.106313Z] fa88a9df || WARNING: torch.distributed.elastic.agent.server.api:Received 15 "
    "death signal, shutting down workers",
    "[2024-02-27T21:35:32.106517Z] fa88a9df || WARNING: torch.distributed.elastic.multiprocessing.api:Sending "
    "process 165 closing signal SIGTERM",
])
def test_signatures_leave_sigterm_alone(line: str):
    assert not any(s.compiled.search(line) for s in _signatures())


def test_framework_import_with_module_path():
    """Python prints the module's file after `cannot import name ... from 'mod'`; the signature takes it
    (https://github.com/bghira/SimpleTuner/issues/668, a train corpus case)."""
    text = (CORPUS / "bghira-simpletuner-668.log").read_text(encoding="utf-8")
    with excluding({"corpus:bghira-simpletuner-668"}):
        result = diagnose_text(text, name="bghira-simpletuner-668.log")
    assert result["causes"][0]["id"] == "framework_version_mismatch", [c["id"] for c in result["causes"][:3]]
