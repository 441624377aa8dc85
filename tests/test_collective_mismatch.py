"""`Detected mismatch between collectives`: the same operation with different tensors is collective_shape_mismatch,
a different operation (or sequence number) is rank_conditional_collective, whole or cut where real logs get cut.

Every line here is a real torch 2.13 line from tests/data/logs (or the knowledge base's quote), cut at a point
where public logs are found cut (aurekaresearch/OpenDDE#23 stops at "...(nullopt))).Collectiv").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.diagnose import diagnose_text
from distdoctor.knowledge import entries_by_cause

LOGS = Path(__file__).resolve().parent / "data" / "logs"
SAME_OP = "gen_shape_mismatch_gather_detail.log"  # ALLGATHER [51] vs ALLGATHER [50]
OTHER_OP = "gen_rank0_allreduce_detail.log"  # ALLREDUCE [1] vs BROADCAST [1000]


def _mismatch_lines(log: str) -> list[str]:
    lines = [ln for ln in (LOGS / log).read_text(encoding="utf-8").splitlines()
             if "Detected mismatch between collectives on ranks" in ln]
    assert len(lines) == 2, log  # one per rank
    return lines


def _causes(text: str) -> list[str]:
    return [c["id"] for c in diagnose_text(text)["causes"]]


def _cut(line: str, before: str) -> str:
    return line[:line.index(before)]


@pytest.mark.parametrize("log,cut,top,absent", [
    (SAME_OP, None, "collective_shape_mismatch", "rank_conditional_collective"),
    (SAME_OP, "Collectives differ", "collective_shape_mismatch", None),
    (OTHER_OP, None, "rank_conditional_collective", "collective_shape_mismatch"),
    (OTHER_OP, "Collectives differ", "rank_conditional_collective", "collective_shape_mismatch"),
    # one fingerprint only (older torch printed no second one): the op cannot be compared (see below)
    (SAME_OP, ", but Rank", "rank_conditional_collective", None),
], ids=["same-op", "same-op-cut", "other-op", "other-op-cut", "one-fingerprint"])
def test_same_op_vs_different_op(log: str, cut: str | None, top: str, absent: str | None) -> None:
    lines = _mismatch_lines(log)
    text = "\n".join(_cut(ln, cut) if cut else ln for ln in lines)
    got = _causes(text)
    assert got and got[0] == top, got
    assert absent is None or absent not in got, got


def test_one_fingerprint_keeps_the_size_reading_as_an_alternative() -> None:
    """With one fingerprint the op cannot be compared: the skipped collective is the answer, and the size mismatch
    (the same message template) is only an alternative to check, without a patch."""
    r = diagnose_text("\n".join(_cut(ln, ", but Rank") for ln in _mismatch_lines(SAME_OP)))
    assert r["causes"][0]["id"] == "rank_conditional_collective" and r["verdict"] == "confident"
    alt = {c["id"]: c for c in r["causes"][1:]}["collective_shape_mismatch"]
    assert alt["role"] == "alternative" and alt["patch"] is None and alt["level"] in ("structural", "similar")
    assert all(e["kind"] in ("structural", "similar") for e in alt["evidence"])


def test_one_rank_line_alone_is_enough() -> None:
    """A single rank's line holds both fingerprints, as in a log that kept one rank's traceback."""
    assert _causes(_mismatch_lines(SAME_OP)[0])[0] == "collective_shape_mismatch"
    assert _causes(_mismatch_lines(OTHER_OP)[1])[0] == "rank_conditional_collective"


def test_gloo_abort_without_detail_names_both_candidates() -> None:
    """Without DETAIL gloo's abort reads the same for both causes: the shape mismatch stays a candidate."""
    quote = next(q.text for q in entries_by_cause()["collective_shape_mismatch"].quotes
                 if "Received data size doesn't match expected size" in q.text)
    got = _causes(quote)
    assert got[:2] == ["rank_conditional_collective", "collective_shape_mismatch"], got
