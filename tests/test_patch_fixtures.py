"""Fixture pairs: tests/fixtures/patches/<patch_id>/<name>.in.py (+ <name>.out.py).

With an .out.py, the patch <patch_id> alone must produce it byte for byte; without one, the input
must come back unchanged. Either way a second run changes nothing and the result compiles.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from distdoctor.paths import patch_registry
from distdoctor.patching.engine import patch_source

patches = patch_registry()

FIXTURES = Path(__file__).parent / "fixtures" / "patches"
CASES = sorted(FIXTURES.glob("*/*.in.py"))


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # no newline translation: CRLF must survive


def test_fixture_folders_name_patches():
    known = set(patches.ids())
    assert CASES, "no fixtures found"
    for folder in {c.parent.name for c in CASES}:
        assert folder in known, f"tests/fixtures/patches/{folder}/ names no patch"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name[:-6]}" for c in CASES])
def test_fixture(case: Path):
    patch = patches.get(case.parent.name)
    before = _read(case)
    expected_path = case.with_name(case.name[: -len(".in.py")] + ".out.py")
    result = patch_source(before, [patch], path=str(case))
    if expected_path.exists():
        expected = _read(expected_path)
        assert result.new_source == expected
        assert result.changes, "a rewrite must be reported"
        assert all(c.patch == patch.PATCH.id and c.line >= 1 for c in result.changes)
    else:
        assert result.new_source is before and result.changes == []
    again = patch_source(result.new_source, [patch], path=str(case))
    assert again.new_source == result.new_source and again.changes == [], "second run changed something"
    text = result.new_source.lstrip("\ufeff")
    cst.parse_module(text)
    compile(text, str(case), "exec", dont_inherit=True)
