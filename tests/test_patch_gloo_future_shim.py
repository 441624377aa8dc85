"""Unit tests of the gloo_future_shim patch: its fixtures and VALID/INVALID through the engine, idempotence, compile."""
from __future__ import annotations

from pathlib import Path

import pytest

import patches.gloo_future_shim as patch
from distdoctor.patching.base import PatchOptions
from distdoctor.patching.engine import patch_source
from distdoctor.paths import ROOT

FIXTURES = sorted((ROOT / "tests" / "fixtures" / "patches" / "gloo_future_shim").glob("*.in.py"))


def apply(source: str, prefix: str = "DISTDOCTOR") -> tuple[str, list]:
    result = patch_source(source, [patch], PatchOptions(env_prefix=prefix), "fixture.py")
    return result.new_source, result.changes


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
def test_fixture(fixture: Path) -> None:
    source = fixture.read_text()
    expected_path = fixture.with_name(fixture.name.replace(".in.py", ".out.py"))
    expected = expected_path.read_text() if expected_path.exists() else source
    new, changes = apply(source)
    assert new == expected
    assert bool(changes) == (expected != source)
    assert all(c.patch == "gloo_future_shim" and c.line > 0 for c in changes)
    compile(new, str(fixture), "exec")
    again, more = apply(new)
    assert again == new and not more  # idempotent


def test_valid_untouched() -> None:
    for source in patch.VALID:
        assert apply(source) == (source, [])


def test_invalid_rewritten() -> None:
    for before, after in patch.INVALID:
        new, changes = apply(before)
        assert new == after and changes
        assert apply(new) == (new, [])
