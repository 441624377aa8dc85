"""Screens (a patch's optional `screen(ast_tree)`) only decide whether libcst looks at a file: they must
never turn away a file that the patch's Transformer would rewrite. Checked over every fixture, every
patch's INVALID examples and every bundled program, for every patch that has a screen."""

from __future__ import annotations

import ast
import types

import pytest

from distdoctor.paths import ROOT, patch_registry
from distdoctor.patching.engine import patch_source

patches = patch_registry()

SCREENED = [mod for mod in patches.all_patches() if hasattr(mod, "screen")]


def _corpus() -> list[tuple[str, str]]:
    files = sorted((ROOT / "tests" / "fixtures" / "patches").glob("*/*.py"))
    files += sorted((ROOT / "evals" / "programs").glob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    out = [(str(p.relative_to(ROOT)), p.read_bytes().decode("utf-8").lstrip("\ufeff")) for p in files]
    for mod in patches.all_patches():
        out += [(f"{mod.PATCH.id} INVALID {i}", src) for i, (src, _) in enumerate(getattr(mod, "INVALID", []))]
    return out


CORPUS = _corpus()


def _unscreened(mod: types.ModuleType) -> types.SimpleNamespace:
    return types.SimpleNamespace(PATCH=mod.PATCH, Transformer=mod.Transformer)


def test_parsing_patches_have_screens():
    assert {m.PATCH.id for m in SCREENED} >= {"cuda_requirements", "gloo_backend", "gloo_future_shim", "int_device",
                                              "local_rank_device", "sdpa_force"}


@pytest.mark.parametrize("mod", SCREENED, ids=[m.PATCH.id for m in SCREENED])
def test_screen_never_rejects_a_file_the_patch_rewrites(mod):
    rewritten = 0
    for name, source in CORPUS:
        result = patch_source(source, [_unscreened(mod)], path=name)
        if result.changes:
            rewritten += 1
            assert mod.screen(ast.parse(source)), f"{mod.PATCH.id}.screen rejects {name}, which it rewrites"
    assert rewritten >= 1, f"no file in the corpus exercises {mod.PATCH.id}"
