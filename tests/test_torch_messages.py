"""torch 2.13's own distributed messages that the knowledge base quotes from evals/programs/fail_torch_messages.py
(PREMUL_SUM on gloo, a dead TCPStore host, LOCAL_RANK without a launcher, the MPI backend of a wheel, FSDP
without an accelerator, torchrun's checks of its own flags, --virtual-local-rank, Join's skew warning): each
make_logs.py case of that program, run for real now, still prints its message, and the diagnosis names the
case's cause first from a knowledge-base signature, not from similarity."""

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
