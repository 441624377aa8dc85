"""The hang doctor across nodes, for real: `srun --overlap --jobid J --ntasks-per-node=1 hang.py --collect` on the
one-node Slurm of the suite, and `hang.py --collect` in each of two network namespaces (two hosts) merged with
`hang.py --merge`. Each hangs a real job, names its odd rank, cause and line, and leaves no process behind."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distdoctor.hang import jobs, merge
from distdoctor.hang.live import CollectError, collect
from distdoctor.hang.programs import BY_NAME
from distdoctor.launch import render

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "tests" / "infra"
HANG = [sys.executable, str(ROOT / "scripts" / "hang.py")]
sys.path.insert(0, str(INFRA))

from netns import netns_unavailable, two_nodes  # noqa: E402
from test_slurm import sbatch_for, slurm_env  # noqa: E402,F401 - slurm_env is a fixture


def merged_report(files: list[Path]) -> dict:
    res = subprocess.run([*HANG, "--merge", *map(str, files), "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout)


def assert_names(out: dict, name: str) -> None:
    case = BY_NAME[name]
    assert out["odd_ranks"] == list(case.odd_ranks), out["verdict"]
    assert out["causes"][0]["id"] == case.cause
    assert Path(out["location"]["file"]).name == case.program.name and out["location"]["line"] == case.line


@pytest.mark.slurm
def test_srun_collect_on_every_node_then_merge(slurm_env, tmp_path):
    case = BY_NAME["hang_rank0_eval"]
    script = tmp_path / "job.sbatch"
    script.write_text(sbatch_for(case.program, [], tmp_path))
    job = subprocess.run(["sbatch", "--parsable", str(script)], env=slurm_env, cwd=tmp_path, capture_output=True,
                         text=True, check=True, timeout=30).stdout.strip().split(";")[0]
    try:
        jobs.wait_stuck(lambda: collect(slurm_job=job), timeout=90)
        res = subprocess.run(["srun", "--overlap", "--jobid", job, "--ntasks-per-node=1",
                              f"--output={tmp_path}/hang-%N.json", *HANG, "--collect"],
                             env=slurm_env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        out = merged_report(sorted(tmp_path.glob("hang-*.json")))  # one file per node, named by srun
    finally:
        subprocess.run(["scancel", job], env=slurm_env, capture_output=True, timeout=30)
    assert_names(out, case.name)
    assert sorted(r["rank"] for r in out["ranks"]) == [0, 1]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # scancel ends the step: no rank of the job may be left
        try:
            collect(slurm_job=job)
        except CollectError:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"ranks of Slurm job {job} still alive after scancel")


@pytest.mark.netns
def test_collect_on_two_hosts_then_merge(tmp_path):
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    case = BY_NAME["hang_straggler_io"]
    with two_nodes() as nodes:
        r = render("generic-ssh", str(case.program), [], master_addr=nodes[0].addr, master_port=29621,
                   ifname=nodes[0].ifname, torchrun=f"{sys.executable} -m torch.distributed.run")
        started = [jobs.spawn(n.cmd(["bash", "-c", c]), tmp_path / f"node{i}.log", cwd=ROOT)
                   for i, (n, c) in enumerate(zip(nodes, r.commands))]
        try:
            jobs.wait_stuck(lambda: merge([collect(job.pid) for job in started]), timeout=90)
            files = []
            for i, (n, job) in enumerate(zip(nodes, started)):  # on each host, as a user would over ssh
                res = subprocess.run(n.cmd([*HANG, "--pid", str(job.pid), "--collect", "--host", f"node{i}"]),
                                     capture_output=True, text=True, timeout=60)
                assert res.returncode == 0, res.stderr
                files.append(tmp_path / f"node{i}.json")
                files[-1].write_text(res.stdout)
            out = merged_report(files)
        finally:
            left = [pid for job in started for pid in job.kill()]
    assert not left, left
    assert_names(out, case.name)
    assert out["hosts"] == ["node0", "node1"]
    assert {r["rank"]: r["host"] for r in out["ranks"]} == {0: "node0", 1: "node1"}
