"""Signatures written from torch's own source: the message each raises is read from the installed torch (libcst, never
imported or run), its placeholders filled the ways a run fills them, and the diagnosis must name the cause from the
signature (a confident answer), whatever the numbers, devices and hosts."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
import torch

from distdoctor.diagnose import diagnose_text

TORCH = Path(torch.__file__).resolve().parent

# (file under torch/, a fragment of the raised message, exception class as printed, fillings of its {}s, cause)
CASES = [
    ("serialization.py", "Attempting to deserialize object on {} device", "RuntimeError",
     [["CUDA", "3", "cuda", "1"], ["CUDA", "7", "cuda", "4"]], "torch_load_no_map_location"),
    ("distributed/fsdp/_init_utils.py", "Inconsistent compute device and `device_id`", "ValueError",
     [["1", "cuda:0", "cuda:1"], ["12", "cuda:0", "cuda:4"]], "local_rank_device"),
]


def _text(node: cst.BaseExpression) -> str | None:
    """A string expression's text, each formatted field as {}; None for anything else."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.FormattedString):
        return "".join(p.value if isinstance(p, cst.FormattedStringText) else "{}" for p in node.parts)
    if isinstance(node, cst.ConcatenatedString):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


def raised_messages(path: Path) -> list[str]:
    """The first argument of every `raise X(<string>)` in a Python file, as text with {} placeholders."""
    out: list[str] = []

    class Raises(cst.CSTVisitor):
        def visit_Raise(self, node: cst.Raise) -> None:
            if isinstance(node.exc, cst.Call) and node.exc.args:
                text = _text(node.exc.args[0].value)
                if text:
                    out.append(text)

    cst.parse_module(path.read_text(encoding="utf-8")).visit(Raises())
    return out


@pytest.mark.parametrize("rel, fragment, exc, fills, cause", CASES, ids=[c[4] + ":" + c[0] for c in CASES])
def test_torch_message_template_names_its_cause(rel, fragment, exc, fills, cause):
    found = [m for m in raised_messages(TORCH / rel) if fragment in m]
    assert found, f"torch/{rel} no longer raises a message with {fragment!r} (torch {torch.__version__})"
    template = found[0]
    for values in fills:
        assert template.count("{}") == len(values), (template, values)
        parts = template.split("{}")
        line = f"{exc}: " + "".join(p + v for p, v in zip(parts, values + [""]))
        r = diagnose_text(line)
        assert [c["id"] for c in r["causes"]][:1] == [cause], (line, [c["id"] for c in r["causes"]])
        assert r["verdict"] == "confident" and r["causes"][0]["level"] == "signature", (line, r["verdict"])


# Real logs (train split of evals/corpus/) whose line another torch release words differently from the signature
# first written: two repositories each, so the wider signature is not one log's.
REWORDED = [("nvidia-megatron-lm-1541", "process_group_not_destroyed"), ("ai2cm-ace-679", "process_group_not_destroyed"),
            ("huggingface-transformers-27744", "fsdp_mixed_dtype"), ("pytorch-pytorch-104690", "fsdp_mixed_dtype")]


@pytest.mark.parametrize("case_id, cause", REWORDED)
def test_reworded_messages_are_signatures(case_id, cause):
    from distdoctor.corpus import train_cases
    from distdoctor.diagnose.retrieval import excluding

    (case,) = [c for c in train_cases() if c.id == case_id]
    assert case.cause == cause
    with excluding({f"corpus:{c.id}" for c in train_cases()}):  # no neighbour: the signature alone
        r = diagnose_text(case.log, name=f"{case_id}.log")
    assert r["causes"][0]["id"] == cause and r["causes"][0]["level"] == "signature", r["causes"][:2]
