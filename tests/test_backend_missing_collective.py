"""backend_missing_collective: a backend other than gloo lacks the collective called. Its signature reads the real
lines its entry quotes; gloo's own gap stays gloo_missing_feature, on the real logs that show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.corpus import train_cases
from distdoctor.diagnose.engine import diagnose_text

LOGS = Path(__file__).resolve().parent / "data" / "logs"


@pytest.mark.parametrize("line", [
    # https://github.com/facebookresearch/atlas/issues/6
    "RuntimeError: ProcessGroupNCCL does not support gather",
    # https://github.com/intel/intel-extension-for-pytorch/issues/647
    "RuntimeError: ProcessGroupCCL does not support reduce_scatter",
    # https://github.com/deepspeedai/DeepSpeed/issues/2872 and https://github.com/NVIDIA/Megatron-LM/issues/1369
    "RuntimeError: ProcessGroup nccl does not support _reduce_scatter_base",
    "Backend nccl does not support reduce_scatter_tensor_coalesced",
])
def test_a_backend_without_the_collective_is_named(line: str) -> None:
    r = diagnose_text(line)
    assert r["verdict"] == "confident" and r["causes"][0]["id"] == "backend_missing_collective", r["causes"][:2]
    assert r["causes"][0]["level"] == "signature"


@pytest.mark.parametrize("line", [
    # https://github.com/deepinsight/insightface/issues/1813 and https://github.com/metno/bris-inference/pull/140
    # (quoted in references/backends.md#gloo_missing_feature)
    "RuntimeError: ProcessGroupGloo does not support reduce_scatter",
    "[rank0]: RuntimeError: Backend gloo does not support alltoall",
])
def test_gloo_lacking_the_collective_stays_gloo_missing_feature(line: str) -> None:
    r = diagnose_text(line)
    assert (r["causes"][0]["id"], r["causes"][0]["level"]) == ("gloo_missing_feature", "signature"), r["causes"][:2]
    # the other backends' cause may come up as a similar log, never on a signature of its own
    assert all(c["level"] != "signature" for c in r["causes"] if c["id"] == "backend_missing_collective")


def test_the_corpus_train_cases_name_it() -> None:
    cases = [c for c in train_cases() if c.cause == "backend_missing_collective" and c.text == "printed"]
    assert cases
    got = {c.id: diagnose_text(c.log, c.context or None)["causes"][0]["id"] for c in cases}
    assert set(got.values()) == {"backend_missing_collective"}, got


GLOO_LOGS = sorted(m for m in LOGS.glob("*.meta.yaml") if "expected_cause: gloo_missing_feature" in m.read_text())


@pytest.mark.parametrize("meta", GLOO_LOGS, ids=lambda m: m.name)
def test_gloo_missing_feature_real_logs_keep_their_cause(meta: Path) -> None:
    """tests/data/logs' real gloo_missing_feature logs still go to gloo_missing_feature, never to the new id."""
    log = meta.with_name(meta.name.replace(".meta.yaml", ".log")).read_text(encoding="utf-8")
    got = diagnose_text(log)["causes"]
    assert got[0]["id"] == "gloo_missing_feature", got[:2]
    assert all(c["level"] != "signature" for c in got if c["id"] == "backend_missing_collective"), got


def test_gloo_logs_are_found() -> None:
    assert len(GLOO_LOGS) >= 4
