"""torch 2.13's own distributed messages that the knowledge base quotes from evals/programs/fail_torch_messages.py
(PREMUL_SUM on gloo, a dead TCPStore host, LOCAL_RANK without a launcher, the MPI backend of a wheel, FSDP
without an accelerator, torchrun's checks of its own flags, --virtual-local-rank, Join's skew warning): each
make_logs.py case of that program, run for real now, still prints its message, and the diagnosis names the
case's cause first from a knowledge-base signature, not from similarity. Store waits that run out
(fail_store_wait.py) and DataLoader workers that die (fail_dataloader_worker_dies.py) are read the same way."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from distdoctor import paths
from distdoctor.diagnose.engine import diagnose_text
from distdoctor.runner import run


def _make_logs():
    if "make_logs" in sys.modules:
        return sys.modules["make_logs"]
    spec = importlib.util.spec_from_file_location("make_logs", paths.ROOT / "tests" / "data" / "make_logs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_logs"] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


MAKE_LOGS = _make_logs()
CASES = [c for c in MAKE_LOGS.CASES if c.program == "fail_torch_messages.py"]


def test_every_variant_has_a_case():
    variants = {c.script_args[c.script_args.index("--variant") + 1] for c in CASES}
    assert variants >= {"premul_sum", "store_host_died", "local_rank_env", "mpi_backend", "fsdp_no_accelerator",
                        "uneven_join", "ok"}


@pytest.mark.torchrun
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_torch_message_names_its_cause(case) -> None:
    env = {k: v for k, v in case.env.items() if k not in ("HELD_PORT", "CLOSED_PORT")}
    res = run(MAKE_LOGS.command(case), timeout=case.timeout, cwd=paths.ROOT, env=env)
    assert not res.timed_out, res.output[-2000:]
    missing = [s for s in case.expect if s not in res.output]
    assert not missing, (missing, res.output[-2000:])
    causes = diagnose_text(res.output)["causes"]
    assert causes and causes[0]["id"] == case.cause, ([c["id"] for c in causes[:3]], res.output[-1500:])
    assert causes[0]["level"] == "signature", causes[0]


STORE_WAITS = {c.name: c for c in MAKE_LOGS.CASES if c.program == "fail_store_wait.py"}
WORKER_DEATHS = [c for c in MAKE_LOGS.CASES if c.program == "fail_dataloader_worker_dies.py"]


def _run(case) -> str:
    """The case's real run; a race the case declares (`attempts`) is run again until torch prints what it expects."""
    for _ in range(max(1, case.attempts)):
        res = run(MAKE_LOGS.command(case), timeout=case.timeout, cwd=paths.ROOT, env=case.env)
        assert not res.timed_out, res.output[-2000:]
        missing = [s for s in case.expect if s not in res.output]
        if not missing:
            return res.output
    raise AssertionError((missing, res.output[-2000:]))


@pytest.mark.torchrun
@pytest.mark.parametrize("name, cause, level, missing", [
    ("gen_store_wait_late_rank", "rank_start_skew", "structural", [0]),
    ("gen_store_wait_new_group", "rank_conditional_collective", "structural", [1]),
    ("gen_store_wait_peer_failed", "peer_died_first", "signature", None),
    ("gen_store_barrier_oversized", "store_barrier_world_size", "structural", [2])])
def test_a_store_wait_names_whom_the_ranks_missed(name, cause, level, missing) -> None:
    """torch's "wait timeout after Nms, keys: ..." run for real: the key awaited names the late rank, the
    new_group some rank skipped, or (beside a failed rank's error) the failure it echoes; never an unreachable
    rendezvous (the store was reached)."""
    out = _run(STORE_WAITS[name])
    r = diagnose_text(out)
    assert r["verdict"] == "confident" and (r["causes"][0]["id"], r["causes"][0]["level"]) == (cause, level), \
        ([(c["id"], c["level"]) for c in r["causes"][:3]], out[-2500:])
    assert r["first_failure"].get("missing_ranks") == missing
    assert "rendezvous_unreachable" not in {c["id"] for c in r["causes"]}


@pytest.mark.torchrun
def test_a_store_key_of_the_programs_own_gives_candidates() -> None:
    r = diagnose_text(_run(STORE_WAITS["gen_store_wait_own_key"]))
    assert r["verdict"] == "candidates" and r["fix"] is None and "ckpt_step" in r["next_step"]


@pytest.mark.torchrun
@pytest.mark.parametrize("case", WORKER_DEATHS, ids=lambda c: c.name)
def test_a_dataloader_worker_death_is_its_ranks_first_failure(case) -> None:
    """A worker that exits or segfaults is a first failure of no distributed cause (peer_died_first: rank 0 only
    echoes it); a SIGKILLed one is the OOM killer's (oom_one_rank)."""
    out = _run(case)
    r = diagnose_text(out)
    # the whole run in the message: timing changes what each rank prints (race_dataloader_worker_segv_reset.log)
    assert r["verdict"] == "confident" and r["causes"][0]["id"] == case.cause, out
    # torch's loader error, or (segfault) its signal handler's line before it: both name the worker
    assert r["first_failure"]["rank"] == 1 and "worker" in r["first_failure"]["text"], (r["first_failure"], out)
