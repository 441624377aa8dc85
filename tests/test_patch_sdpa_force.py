"""Unit tests of the sdpa_force patch: its fixtures and VALID/INVALID through the engine, idempotence, compile."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import patches.sdpa_force as patch
from distdoctor.patching.base import PatchOptions
from distdoctor.patching.engine import patch_source
from distdoctor.paths import ROOT

FIXTURES = sorted((ROOT / "tests" / "fixtures" / "patches" / "sdpa_force").glob("*.in.py"))


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
    assert all(c.patch == "sdpa_force" and c.line > 0 for c in changes)
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


DRIVER = """
import importlib, math, sys
import torch
import torch.nn.functional as F

for name in sys.argv[1:]:
    module = importlib.import_module(name)
    torch.manual_seed(0)
    layer = module.SelfAttention(16, 2)
    x = torch.randn(2, 5, 16)
    out = layer(x)
    q, k, v = layer.qkv(x).view(2, 5, 3, 2, 8).unbind(2)
    ref = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=True, scale=1 / math.sqrt(8)).transpose(1, 2).reshape(2, 5, 16)
    assert torch.allclose(out, ref, atol=1e-6), name
    print("STANDIN_OK", name)
"""


def test_forced_standins_run_on_cpu(tmp_path: Path) -> None:
    """The patched fixtures really import and compute attention without flash-attn when forced (and only then)."""
    from distdoctor.runner import run

    folder = ROOT / "tests" / "fixtures" / "patches" / "sdpa_force"
    names = ["module_import_whole", "module_level_import"]
    for name in names:
        (tmp_path / f"{name}.py").write_text((folder / f"{name}.out.py").read_text())
    (tmp_path / "driver.py").write_text(DRIVER)
    forced = run([sys.executable, "driver.py", *names], timeout=60, cwd=tmp_path, env={"DISTDOCTOR_FORCE_SDPA": "1"})
    assert forced.ok, forced.output[-2000:]
    assert forced.output.count("STANDIN_OK") == 2
    plain = run([sys.executable, "driver.py", names[0]], timeout=60, cwd=tmp_path, env={"DISTDOCTOR_FORCE_SDPA": ""})
    assert not plain.ok and "No module named 'flash_attn'" in plain.output, plain.output[-2000:]
