"""sdpa_force beyond its fixtures (tests/test_patch_fixtures.py) and examples (tests/test_patch_examples.py):
the patched code really runs on CPU when forced."""
from __future__ import annotations

import sys
from pathlib import Path

from distdoctor.paths import ROOT
from distdoctor.runner import run, succeeded

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
    folder = ROOT / "tests" / "fixtures" / "patches" / "sdpa_force"
    names = ["module_import_whole", "module_level_import"]
    for name in names:
        (tmp_path / f"{name}.py").write_text((folder / f"{name}.out.py").read_text())
    (tmp_path / "driver.py").write_text(DRIVER)
    forced = run([sys.executable, "driver.py", *names], timeout=60, cwd=tmp_path, env={"DISTDOCTOR_FORCE_SDPA": "1"})
    assert succeeded(forced), forced.output[-2000:]
    assert forced.output.count("STANDIN_OK") == 2
    plain = run([sys.executable, "driver.py", names[0]], timeout=60, cwd=tmp_path, env={"DISTDOCTOR_FORCE_SDPA": ""})
    assert not plain.ok and "No module named 'flash_attn'" in plain.output, plain.output[-2000:]
