"""fastcst's parse builds the same tree as libcst's (validation only skipped), and its code generation
writes the same text and the same position table."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
import torch
from libcst.metadata import MetadataWrapper, PositionProvider

from distdoctor.patching import fastcst, fastmeta

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "patches").glob("*/*.in.py"))
TORCH = Path(torch.__file__).parent
SAMPLES = FIXTURES[:20] + [TORCH / p for p in ("nn/parallel/distributed.py", "_tensor.py")]
SYNTAX = '''
x = ((a) + (b))[(1):(2)]
y = (lambda q: (q))((yield))
z = f"{(a)!r:>{(b)}}" + (("s"))
async def g():
    await (h)
'''


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_same_tree_text_and_positions(path: Path) -> None:
    text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    reference = cst.parse_module(text)
    fast = fastcst.parse_module(text)
    assert fast.deep_equals(reference)
    assert fastcst.code(fast) == reference.code == text
    wrapper = fastmeta.Wrapper(fast, unsafe_skip_copy=True)
    fastmeta.seed(wrapper)
    expected = MetadataWrapper(fast, unsafe_skip_copy=True).resolve(PositionProvider)
    assert dict(wrapper.resolve(PositionProvider)) == dict(expected)


def test_parenthesized_syntax() -> None:
    module = fastcst.parse_module(SYNTAX)
    assert fastcst.code(module) == SYNTAX
    assert module.deep_equals(cst.parse_module(SYNTAX))


def test_validation_restored_after_parse() -> None:
    fastcst.parse_module("x = 1\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_parse_error_still_raised() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        fastcst.parse_module("def (:\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("still validated")


def test_codegen_restored_after_code() -> None:
    """code() gives every node class `_codegen = _codegen_impl` while it runs, and takes it back, even
    when the generation fails."""
    from libcst._nodes.base import CSTNode

    fastcst.code(cst.parse_module(SYNTAX))
    assert all("_codegen" not in vars(kind) for kind in fastcst.node_classes())

    class Broken(cst.Pass):
        def _codegen_impl(self, state, **kwargs) -> None:
            raise RuntimeError("broken")

    with pytest.raises(RuntimeError):
        fastcst.code(cst.Module(body=[cst.SimpleStatementLine([Broken()])]))
    assert all(kind._codegen is CSTNode._codegen for kind in fastcst.node_classes())


def test_plain_inits_build_equal_nodes_and_are_restored() -> None:
    """While parsing, node classes use plain __init__s built from their dataclass fields (defaults and
    default factories included); afterwards their own __init__ is back and validates again."""
    inits = dict(fastcst._plain_inits())
    assert cst.Name in inits and cst.SimpleStatementLine in inits
    before = {kind: vars(kind)["__init__"] for kind in inits}
    for kind, init in inits.items():
        assert init.__code__.co_varnames[:init.__code__.co_argcount] == \
            vars(kind)["__init__"].__code__.co_varnames[:init.__code__.co_argcount]  # same parameters
    module = fastcst.parse_module(SYNTAX)
    assert all(vars(kind)["__init__"] is before[kind] for kind in inits)
    assert module.deep_equals(cst.parse_module(SYNTAX))
    name = cst.Name.__new__(cst.Name)
    inits[cst.Name](name, "x")
    assert name.deep_equals(cst.Name("x")) and name.lpar == () and name.rpar == ()
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")
