"""The `distdoctor` command and the skill's scripts: one table, lazy tools, one-line errors, PEP 723 headers."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import libcst as cst
import pytest

from distdoctor import cli, paths
from distdoctor.paths import ROOT

LOG = ROOT / "tests" / "data" / "logs" / "field_nanogpt_dynamo_py312.log"
SCRIPTS = {name: ROOT / tool.script for name, tool in cli.TOOLS.items() if tool.script.startswith("scripts/")}
PRESENT = {name: path for name, path in SCRIPTS.items() if path.is_file()}


def run(*args: str, stdlib_only: bool = False, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run python with args; stdlib_only: without site-packages (no yaml, jsonschema, libcst, torch)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    flags = ["-S"] if stdlib_only else []
    return subprocess.run([sys.executable, *flags, *args], capture_output=True, text=True, timeout=120, env=env,
                          cwd=cwd)


def test_usage_lists_every_tool_and_rejects_unknown_commands():
    out = run("-m", "distdoctor", "--help", stdlib_only=True)
    assert out.returncode == 0
    for name in cli.TOOLS:
        assert f"\n  {name} " in out.stdout
    bad = run("-m", "distdoctor", "frobnicate")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [bad.stderr.strip()] and "unknown command 'frobnicate'" in bad.stderr


def test_subcommand_is_the_same_engine_as_its_script(tmp_path):
    via_command = run("-m", "distdoctor", "diagnose", str(LOG), "--json", cwd=tmp_path)
    via_script = run(str(SCRIPTS["diagnose"]), str(LOG), "--json", cwd=tmp_path)
    assert via_command.returncode == via_script.returncode == 0
    assert via_command.stdout == via_script.stdout and '"compile_toolchain"' in via_command.stdout
    listed = run("-m", "distdoctor", "patch", "--list")
    assert listed.returncode == 0 and listed.stdout == run(str(SCRIPTS["patch"]), "--list").stdout
    assert "gloo_backend" in listed.stdout


def test_a_tool_whose_module_is_absent_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setitem(cli.TOOLS, "later", cli.Tool("distdoctor.no_such_tool.cli:main", "a tool of a later version",
                                                     "scripts/later.py"))
    assert cli.main(["later", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "later: not available in this version" in err


@pytest.mark.parametrize("name", ["hang", "check"])
def test_tools_built_elsewhere_are_registered_lazily(name):
    module = cli.TOOLS[name].target.partition(":")[0]
    out = run("-m", "distdoctor", name, "--help")
    if importlib.util.find_spec(module.rpartition(".")[0]) is None:
        assert out.returncode == 2 and out.stderr.count("\n") == 1
        assert "not available in this version" in out.stderr
    else:
        assert out.returncode == 0 and "usage:" in out.stdout


def test_a_missing_dependency_inside_a_present_module_is_named_not_called_unavailable(tmp_path, monkeypatch, capsys):
    (tmp_path / "tool_with_missing_dep.py").write_text("import no_such_dependency_xyz\n\ndef main(argv):\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    tool = cli.Tool("tool_with_missing_dep:main", "a tool", "scripts/x.py", ("yaml",))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
        cli.load(tool)
    monkeypatch.setitem(cli.TOOLS, "x", tool)
    assert cli.main(["x", "--help"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing no_such_dependency_xyz (import no_such_dependency_xyz)" in err
    assert err.rstrip().endswith("-m pip install pyyaml no_such_dependency_xyz")


@pytest.mark.parametrize("name", sorted(PRESENT))
def test_script_help_needs_no_third_party_module(name):
    out = run(str(PRESENT[name]), "--help", stdlib_only=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"usage: {PRESENT[name].name}")


@pytest.mark.parametrize("name", sorted(n for n in PRESENT if cli.TOOLS[n].needs))
def test_script_without_its_packages_prints_one_line_with_the_install_command(name):
    args = {"diagnose": [str(LOG)], "patch": ["--list"], "launch": ["--profile", "local", "train.py"]}.get(name, [])
    out = run(str(PRESENT[name]), *args, stdlib_only=True)
    assert out.returncode == 2 and out.stdout == ""
    line = out.stderr.strip()
    assert "\n" not in line and line.startswith(f"{PRESENT[name].name}: missing ")
    tool = cli.TOOLS[name]
    if tool.in_job:
        assert "job's own Python" in line
    else:
        assert f"uv run {PRESENT[name]} " in line and f"-m pip install {' '.join(tool.distributions())}" in line


def _inline_metadata(path: Path) -> dict | None:
    """The script's PEP 723 block (`# /// script` ... `# ///` in its leading comments), parsed; None if absent."""
    header = cst.parse_module(path.read_text(encoding="utf-8")).header
    comments = [line.comment.value for line in header if line.comment is not None]
    if "# /// script" not in comments:
        return None
    start = comments.index("# /// script")
    end = comments.index("# ///", start + 1)
    return tomllib.loads("\n".join(c[2:] if c.startswith("# ") else c[1:] for c in comments[start + 1:end]))


def test_inline_metadata_names_exactly_what_each_script_imports():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pinned = {dep.split(">")[0].split("=")[0].strip(): dep for dep in pyproject["project"]["dependencies"]}
    for name, path in PRESENT.items():
        meta = _inline_metadata(path)
        tool = cli.TOOLS[name]
        if tool.in_job:  # runs with the job's interpreter and torch: uv must not build an env without torch
            assert meta is None, f"{path.name}: a script run inside the job has no inline metadata"
            continue
        assert meta is not None, f"{path.name}: no PEP 723 block"
        assert meta["requires-python"] == pyproject["project"]["requires-python"]
        assert meta["dependencies"] == [pinned[d] for d in tool.distributions()], path.name
        assert "torch" not in " ".join(meta["dependencies"])


def test_patch_registry_is_distdoctor_patches_in_the_checkout():
    registry = paths.patch_registry()
    assert registry.__name__ == "distdoctor.patches" and not paths.BUNDLED
    assert Path(registry.__file__).resolve() == (ROOT / "patches" / "__init__.py").resolve()
    assert paths.patch_module("gloo_backend").PATCH.id == "gloo_backend"
    assert "patches" not in sys.modules or sys.modules["patches"] is not registry


def test_help_that_needs_a_package_is_one_line_too():
    out = run(str(SCRIPTS["launch"]), "--profile", "local", "--help", stdlib_only=True)  # profile options: yaml
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith("launch.py: missing pyyaml (import yaml)")


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`distdoctor diagnose --json LOG | head -1`: the pipe closes before the output is written; the tool stops
    quietly with 141 (what a shell reports for SIGPIPE), no BrokenPipeError traceback on stderr."""
    log = ROOT / "tests/data/logs/gpu_device_assert_rank1.log"
    p = subprocess.Popen([sys.executable, "-m", "distdoctor", "diagnose", "--json", str(log)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == 141 and "Traceback" not in err, err


def test_an_eval_module_whose_reader_leaves_early_gets_no_traceback(tmp_path):
    """The evals' modules run with `python -m` (torch_messages, retrieval_cv, ...) stop as quietly as the CLI."""
    one = {"source": "py", "where": "a.py:1", "kind": "ValueError", "template": "x" * 100000}
    (tmp_path / "m.json").write_text(json.dumps({"messages": [one] * 5, "count": 5}))  # more than a pipe holds
    p = subprocess.Popen([sys.executable, "-m", "distdoctor.evals.torch_messages", "--messages",
                          str(tmp_path / "m.json")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait() == 141 and "Traceback" not in err, err
