"""The patch engine: prefilter and screens, safety on bad files, atomic writes, walking, env prefix."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from distdoctor.paths import patch_registry
from distdoctor.patching.engine import (
    collect_tasks, default_env_prefix, gc_paused, iter_python_files, patch_paths, patch_source, prefilter_strings,
    process_file,
)

patches = patch_registry()

BROKEN = 'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
FIXED = ('import torch.distributed as dist\nimport torch\n\n'
         'dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")\n')
GLOO = [patches.get("gloo_backend")]


def test_registry_sorted_and_lookup():
    ids = patches.ids()
    assert ids == sorted(ids) and {"gloo_backend", "ddp_cpu_args", "cuda_requirements"} <= set(ids)
    assert patches.get("gloo_backend").PATCH.cause == "nccl_without_cuda"
    assert {m.PATCH.id for m in patches.for_cause("nccl_without_cuda")} >= {"gloo_backend", "ddp_cpu_args"}
    with pytest.raises(KeyError, match="unknown patch"):
        patches.get("no_such_patch")


def test_unchanged_source_is_the_same_object():
    source = "import os\nprint(os.getcwd())\n"
    assert patch_source(source).new_source is source
    matched = 'import torch.distributed as dist\ndist.init_process_group("gloo")  # not nccl\n'
    assert patch_source(matched, GLOO).new_source is matched


def test_patch_source_applies_and_reports():
    result = patch_source(BROKEN, GLOO)
    assert result.new_source == FIXED
    assert [(c.line, c.patch) for c in result.changes] == [(2, "gloo_backend")]


def test_patches_compose_in_registry_order():
    src = ("import torch\nimport torch.distributed as dist\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
           "assert torch.cuda.is_available()\ndist.init_process_group('nccl')\nm = DDP(m, device_ids=[0])\n")
    chosen = patches.for_cause("nccl_without_cuda")
    result = patch_source(src, chosen)
    assert {c.patch for c in result.changes} == {"gloo_backend", "ddp_cpu_args", "cuda_requirements"}
    assert patch_source(result.new_source, chosen).changes == []
    compile(result.new_source, "<t>", "exec")


def test_prefilter_union():
    assert "nccl" in prefilter_strings(GLOO)
    assert set(prefilter_strings(patches.for_cause("nccl_without_cuda"))) >= {"nccl", "DistributedDataParallel"}


def test_process_file_writes_atomically_and_keeps_mode(tmp_path):
    f = tmp_path / "train.py"
    f.write_text(BROKEN)
    os.chmod(f, 0o640)
    dry = process_file(str(f), ["gloo_backend"], write=False)
    assert dry.changes and "+dist.init_process_group(" in dry.diff and not dry.written
    assert f.read_text() == BROKEN
    done = process_file(str(f), ["gloo_backend"], write=True)
    assert done.written and f.read_text() == FIXED
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["train.py"]  # no temp file left
    again = process_file(str(f), ["gloo_backend"], write=True)
    assert not again.changes and not again.written


def test_crlf_bom_tabs_comments_survive(tmp_path):
    f = tmp_path / "w.py"
    f.write_bytes(b'\xef\xbb\xbfimport torch.distributed as dist\r\nif x:\r\n\t# keep me\r\n'
                  b'\tdist.init_process_group("nccl")  # gpu\r\n')
    process_file(str(f), ["gloo_backend"], write=True)
    data = f.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert b'\t# keep me\r\n\tdist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")  # gpu\r\n' in data


@pytest.mark.parametrize("content,reason", [
    (b'import torch.distributed as dist\ndist.init_process_group("nccl"\n', "syntax error at line"),
    (b'# nccl \xff\xfe\nx = 1\n', "not UTF-8"),
    (b'nccl\x00\x01\x02binary', "binary file"),
])
def test_bad_files_are_reported_not_touched(tmp_path, content, reason):
    f = tmp_path / "bad.py"
    f.write_bytes(content)
    outcome = process_file(str(f), ["gloo_backend"], write=True)
    assert outcome.error and reason in outcome.error
    assert f.read_bytes() == content


def test_newer_syntax_than_this_python_is_named_not_blamed_on_the_patch(tmp_path):
    # Python 3.12 f-strings (PEP 701) parse in libcst but not in compile() before 3.12
    content = BROKEN.encode() + b'cfg = {"name": "run"}\nprint(f"started {cfg["name"]}")\n'
    f = tmp_path / "train.py"
    f.write_bytes(content)
    outcome = process_file(str(f), ["gloo_backend"], write=True)
    if sys.version_info >= (3, 12):
        assert outcome.written and outcome.error is None
    else:
        assert "does not compile with this Python" in outcome.error and "even before patching" in outcome.error
        assert f.read_bytes() == content


def test_read_only_and_symlink(tmp_path):
    ro = tmp_path / "ro.py"
    ro.write_text(BROKEN)
    os.chmod(ro, 0o444)
    outcome = process_file(str(ro), ["gloo_backend"], write=True)
    assert outcome.error == "read-only file; not written" and ro.read_text() == BROKEN
    assert process_file(str(ro), ["gloo_backend"], write=False).changes  # a dry run still shows the diff
    link = tmp_path / "link.py"
    link.symlink_to(ro)
    assert process_file(str(link), ["gloo_backend"], write=True).error == "symbolic link, not followed"


def test_walk_skips_venvs_vcs_builds_and_symlinks(tmp_path):
    for rel in ["pkg/__init__.py", "pkg/a.py", ".git/x.py", ".venv/lib/y.py", "env/pyvenv.cfg", "env/z.py",
                "build/b.py", "node_modules/n.py", "pkg/__pycache__/c.py", "lib/site-packages/s.py", "notes.txt"]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x = 1\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "linkdir").symlink_to(tmp_path / "outside")
    found = {os.path.relpath(p, tmp_path): err for p, err in iter_python_files(str(tmp_path))}
    assert found == {"pkg/__init__.py": None, "pkg/a.py": None, "linkdir": "symbolic link, not followed"}
    assert list(iter_python_files(str(tmp_path / "missing.py")))[0][1] == "no such file or directory"
    assert list(iter_python_files(str(tmp_path / "notes.txt")))[0][1] == "not a Python file (*.py)"


def test_env_prefix_from_package_or_folder(tmp_path):
    repo = tmp_path / "my-repo"
    (repo / "nano_chat").mkdir(parents=True)
    (repo / "nano_chat" / "__init__.py").write_text("")
    (repo / "tests").mkdir()
    (repo / "tests" / "__init__.py").write_text("")
    assert default_env_prefix(str(repo)) == "NANO_CHAT"
    assert default_env_prefix(str(repo / "nano_chat" / "__init__.py")) == "NANO_CHAT"
    plain = tmp_path / "nanoGPT"
    plain.mkdir()
    assert default_env_prefix(str(plain)) == "NANOGPT"
    tasks, _ = collect_tasks([str(repo)])
    assert tasks and all(t.options.env_prefix == "NANO_CHAT" for t in tasks)


def test_process_pool_gives_same_result(tmp_path):
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(BROKEN if i % 2 else "x = 1\n")
    serial = patch_paths([str(tmp_path)], ["gloo_backend"], jobs=1)
    pooled = patch_paths([str(tmp_path)], ["gloo_backend"], jobs=2)
    assert [(o.path, o.changes, o.diff) for o in serial] == [(o.path, o.changes, o.diff) for o in pooled]
    assert sum(bool(o.changes) for o in pooled) == 3


def test_gc_paused_per_file_collects_the_files_cycles():
    """No automatic collection while one file is patched; its garbage cycles go when it is done."""
    import gc
    import weakref

    class Node:
        pass

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle, as libcst's scope objects make
        ref = weakref.ref(a)
        del a, b
        assert ref() is not None
    assert gc.isenabled() and ref() is None
