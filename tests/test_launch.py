"""Profiles and scripts/launch.py: front matter valid, launches rendered from it, the local one run for real."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from distdoctor import paths
from distdoctor.launch import ProfileError, available_profiles, load_profile, read_front_matter, render
from distdoctor.runner import completed, run

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "scripts" / "launch.py"
TORCHRUN = f"{sys.executable} -m torch.distributed.run"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LAUNCH), *args], capture_output=True, text=True, timeout=60)


def test_profiles_exist_and_validate():
    assert set(available_profiles()) >= {"generic-ssh", "slurm", "local"}
    schema = json.loads((paths.SCHEMAS / "profile.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    for name in available_profiles():
        front = read_front_matter(paths.PROFILES / f"{name}.md")
        jsonschema.validate(front, schema)
        assert load_profile(name).front["name"] == name


def test_generic_ssh_per_node_commands():
    r = render("generic-ssh", "train.py", ["--lr", "3e-4", "a b"], nnodes=3, nproc_per_node=4,
               master_addr="10.0.0.1", master_port=29400, ifname="eth1")
    assert r.kind == "per_node" and len(r.commands) == 3
    for i, cmd in enumerate(r.commands):
        argv = shlex.split(cmd)
        assert argv[:2] == ["GLOO_SOCKET_IFNAME=eth1", "NCCL_SOCKET_IFNAME=eth1"]
        assert f"--node_rank={i}" in argv and "--nnodes=3" in argv and "--nproc_per_node=4" in argv
        assert "--master_addr=10.0.0.1" in argv and "--master_port=29400" in argv
        # `--` right after the script, then the script's own arguments, quoting kept
        assert argv[argv.index("train.py"):] == ["train.py", "--", "--lr", "3e-4", "a b"]
    plain = render("generic-ssh", "train.py", [], master_addr="10.0.0.1")
    assert all("SOCKET_IFNAME" not in c and " -- " not in c for c in plain.commands)
    assert len(plain.commands) == 2  # the profile's default nnodes


def test_slurm_sbatch_script():
    r = render("slurm", "train.py", ["--epochs", "2"], tasks_per_node=4, nnodes=2, gpus_per_node=4,
               ifname="ib0", python="/opt/venv/bin/python")
    s = r.script
    assert r.kind == "script" and s.startswith("#!/bin/bash\n")
    assert "#SBATCH --nodes=2" in s and "#SBATCH --ntasks-per-node=4" in s and "#SBATCH --gpus-per-node=4" in s
    assert 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in s
    assert "export WORLD_SIZE=$SLURM_NTASKS" in s
    assert "export GLOO_SOCKET_IFNAME=ib0" in s and "export NCCL_SOCKET_IFNAME=ib0" in s
    srun = next(line for line in s.splitlines() if line.startswith("srun "))
    assert "--kill-on-bad-exit=1" in srun and "--label" in srun
    assert "RANK=$SLURM_PROCID" in srun and "LOCAL_RANK=$SLURM_LOCALID" in srun
    assert srun.endswith("/opt/venv/bin/python train.py --epochs 2")
    bare = render("slurm", "train.py").script
    assert "gpus-per-node" not in bare and "SOCKET_IFNAME" not in bare and "\n\n\n" not in bare
    subprocess.run(["bash", "-n"], input=bare, text=True, check=True)  # valid shell


@pytest.mark.parametrize("profile,kwargs,message", [
    ("generic-ssh", {}, "needs --master-addr"),
    ("generic-ssh", {"master_addr": "h", "nnodes": "two"}, "--nnodes must be an integer"),
    ("generic-ssh", {"master_addr": "h", "ifname": "eth0; rm -rf /"}, "is not an interface name"),
    ("local", {"bogus": 1}, "has no parameter(s) bogus"),
    ("nope", {}, "unknown profile 'nope'"),
])
def test_render_errors(profile, kwargs, message):
    with pytest.raises(ProfileError, match=None) as exc:
        render(profile, "train.py", **kwargs)
    assert message in str(exc.value)


def test_broken_profile_file_is_named(tmp_path):
    (tmp_path / "bad.md").write_text("---\nname: bad\nlauncher: [unclosed\n---\n# x\n")
    with pytest.raises(ProfileError, match=r"bad\.md:\d+: front matter is not valid YAML"):
        load_profile("bad", root=tmp_path)
    (tmp_path / "bin.md").write_bytes(b"---\n\xff\xfe\x00\n---\n")
    with pytest.raises(ProfileError, match="not UTF-8"):
        load_profile("bin", root=tmp_path)


def test_cli(tmp_path):
    assert cli("--help").returncode == 0
    helped = cli("--profile", "slurm", "--help")
    assert helped.returncode == 0 and "--tasks-per-node" in helped.stdout
    res = cli("--profile", "generic-ssh", "train.py")
    assert res.returncode == 2 and res.stderr.strip() == "launch: profile generic-ssh needs --master-addr"
    assert cli("--profile", "nope", "train.py").returncode == 2
    out = tmp_path / "job.sbatch"
    res = cli("--profile", "slurm", "-o", str(out), "--python", sys.executable, "train.py", "--", "--x", "1")
    assert res.returncode == 0 and out.read_text().rstrip().endswith("train.py --x 1")
    doc = json.loads(cli("--profile", "local", "--json", "t.py").stdout)
    assert doc["kind"] == "per_node" and doc["commands"][0].endswith("--nproc_per_node=2 t.py")


@pytest.mark.torchrun
def test_rendered_local_launch_runs_the_probe():
    r = render("local", str(ROOT / "scripts" / "probe.py"), ["--expect-world-size", "2", "--timeout", "20"],
               torchrun=TORCHRUN)
    res = run(["bash", "-c", r.commands[0]], timeout=90, cwd=ROOT)
    assert completed(res, "VERDICT: OK - all 2 rank", 1), res.output[-2000:]
    assert "VERDICT: OK - all 2 rank(s) joined" in res.output
