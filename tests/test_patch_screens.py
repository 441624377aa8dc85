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


# Screens that follow their Transformer's guards: code under a test that already decides on CUDA is left
# alone by the Transformer, so a screen may turn such a file away, but only for a test that libcst's side
# surely counts (a concatenated "cu" "da" is no guard there). Each case: (patch id, source, rewritten?).
GUARD_CASES = [
    ("cuda_calls_cpu", "import torch\nif torch.cuda.is_available():\n    model.cuda()\n", False),
    ("cuda_calls_cpu", "import torch\nif TEST_CUDA:\n    x = t.cuda()\nelse:\n    torch.cuda.synchronize()\n", False),
    ("cuda_calls_cpu", "import torch\nif torch.device(d).type == 'cuda':\n    y = torch.randn(2, device='cuda')\n",
     False),
    ("cuda_calls_cpu", "import torch\nif torch.device(d).type == 'cu' 'da':\n    y = torch.randn(2, device='cuda')\n",
     True),
    ("cuda_calls_cpu", "import torch\nif ok:\n    model.cuda()\n", True),
    ("cuda_calls_cpu", "import torch\nend = torch.cuda.Event()\nend.synchronize()\nstreams[-1].synchronize()\n",
     False),
    ("cuda_calls_cpu", "import torch\nfrom torch.cuda import synchronize as wait_synchronize\n\nwait_synchronize()\n",
     True),  # an alias the old screen missed
    ("cuda_calls_cpu", "import torch\nskip = partial(skip_if, device='cuda')\ny = torch.zeros(1, device='cuda')\n", True),
    ("cuda_calls_cpu", "import torch\nskip = partial(skip_if, device='cuda')\n", False),
    ("cuda_calls_cpu", "import torch\nm = cls.convert_sync_batchnorm(child)\n", False),
    ("cuda_calls_cpu", "import torch\nm = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n", True),
    ("torch_device_cpu", "import torch\ndist.init_process_group('gloo')\n"
     "d = torch.device('cuda', 0) if torch.cuda.is_available() else torch.device('cpu')\n", False),
    ("torch_device_cpu", "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
     "b = dist.get_default_backend_for_device(kind or 'cpu')\nx = torch.accelerator.set_device_index(0)\n", False),
    ("torch_device_cpu", "import torch\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n"
     "b = dist.get_default_backend_for_device(kind)\n", True),
    ("torch_device_cpu", "import torch\ndist.init_process_group('gloo')\ntorch.accelerator.set_device_index(0)\n", True),
    ("torch_device_cpu", "import torch\ndist.init_process_group('gloo')\n"
     "if device_type == 'cuda':\n    d = torch.device('cuda', 0)\n", False),
    ("torch_device_cpu", "import torch\ndist.init_process_group('gloo')\n"
     "if device_type == 'cu' 'da':\n    d = torch.device('cuda', 0)\n", True),
]


@pytest.mark.parametrize("patch_id,source,rewritten", GUARD_CASES)
def test_guard_aware_screens_agree_with_the_transformer(patch_id, source, rewritten):
    mod = patches.get(patch_id)
    assert bool(patch_source(source, [_unscreened(mod)]).changes) is rewritten
    assert mod.screen(ast.parse(source)) is rewritten


def test_ast_nodes_keeps_walk_order():
    from distdoctor.patching.cstutil import ast_nodes

    tree = ast.parse("import a\ndef f():\n    b = g(1)\n    return h(b)\nclass C:\n    x = k()\n")
    wanted = (ast.Call, ast.Assign, ast.FunctionDef)
    assert ast_nodes(tree, *wanted) == [n for n in ast.walk(tree) if isinstance(n, wanted)]
    assert ast_nodes(ast.parse("x = 1\n"), ast.Call) == []


SDPA_HOOK = '''import torch

attention_override = None


def attend(q, k, v):
    if attention_override == "sdpa":
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return torch.ops.aten._scaled_dot_product_flash_attention(q, k, v)[0]
'''


def test_sdpa_force_screen_keeps_a_module_level_override_hook():
    mod = patches.get("sdpa_force")
    assert mod.screen(ast.parse(SDPA_HOOK))
    assert patch_source(SDPA_HOOK, [mod]).changed


def test_sdpa_force_screen_drops_an_override_name_that_is_no_hook():
    """A flash op named and `*override*` assigned, but not a module-level `= None` compared with "sdpa"
    (torch/_inductor/lowering.py's `override_fn_when_input_bool = ...` inside a function)."""
    mod = patches.get("sdpa_force")
    local = SDPA_HOOK.replace("attention_override = None\n", "").replace(
        "def attend(q, k, v):\n", "def attend(q, k, v):\n    attention_override = None\n")
    unused = SDPA_HOOK.replace('if attention_override == "sdpa":', "if q.dim() == 4:")
    for source in (local, unused):
        assert not mod.screen(ast.parse(source))
        assert not patch_source(source, [_unscreened(mod)]).changed
