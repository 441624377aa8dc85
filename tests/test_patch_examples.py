"""Every patch module's inline VALID / INVALID examples: exact output, untouched valid code, idempotence."""

from __future__ import annotations

import pytest

from distdoctor.paths import patch_registry
from distdoctor.patching.engine import patch_source

patches = patch_registry()

MODULES = patches.all_patches()
VALID = [pytest.param(m, src, id=f"{m.PATCH.id}-valid{i}") for m in MODULES for i, src in enumerate(m.VALID)]
INVALID = [pytest.param(m, before, after, id=f"{m.PATCH.id}-invalid{i}")
           for m in MODULES for i, (before, after) in enumerate(m.INVALID)]


def test_every_patch_has_examples():
    for module in MODULES:
        assert module.VALID and module.INVALID, f"{module.PATCH.id} needs VALID and INVALID examples"
        assert module.Transformer.INFO is module.PATCH


@pytest.mark.parametrize("module,source", VALID)
def test_valid_is_left_alone(module, source):
    result = patch_source(source, [module])
    assert result.new_source == source
    assert result.changes == []


@pytest.mark.parametrize("module,before,after", INVALID)
def test_invalid_is_rewritten_exactly_once(module, before, after):
    result = patch_source(before, [module])
    assert result.new_source == after
    assert result.changes and all(c.patch == module.PATCH.id and c.line >= 1 for c in result.changes)
    compile(result.new_source, "<patched>", "exec")
    again = patch_source(result.new_source, [module])
    assert again.new_source == result.new_source and again.changes == []
