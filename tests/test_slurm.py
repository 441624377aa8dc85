"""Real Slurm (one node, munged + slurmctld + slurmd from tests/infra/slurm.sh): the sbatch script rendered
from profiles/slurm.md runs the probe and a DDP job with 2 tasks, and a task that dies ends the step."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distdoctor.launch import render

ROOT = Path(__file__).resolve().parent.parent
INFRA = ROOT / "tests" / "infra"
DIR = os.environ.get("DISTDOCTOR_SLURM_DIR", "/tmp/distdoctor-slurm")
CONF = f"{DIR}/slurm.conf"

pytestmark = pytest.mark.slurm


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "the test Slurm cluster runs its daemons as root"
    missing = [b for b in ("slurmctld", "slurmd", "sbatch", "srun", "munged") if not shutil.which(b)
               and not Path(f"/usr/sbin/{b}").exists()]
    if missing:
        return f"Slurm not installed ({', '.join(missing)} missing): bash tests/infra/slurm.sh install"
    return None


@pytest.fixture(scope="module")
def slurm_env():
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "SLURM_CONF": CONF}
    already = Path(CONF).is_file() and subprocess.run(["sinfo", "-h"], env=env, capture_output=True).returncode == 0
    if not already:
        subprocess.run(["bash", str(INFRA / "slurm.sh"), "start"], check=True, timeout=60)
    try:
        yield env
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True)
        if not already:
            subprocess.run(["bash", str(INFRA / "slurm.sh"), "stop"], timeout=60)


def submit(env: dict, script_text: str, tmp: Path, limit: float = 90) -> tuple[str, str, float]:
    """sbatch the script, wait until the job leaves the queue; returns (job id, output, seconds)."""
    path = tmp / "job.sbatch"
    path.write_text(script_text)
    start = time.monotonic()
    job = subprocess.run(["sbatch", "--parsable", str(path)], env=env, cwd=tmp, capture_output=True, text=True,
                         check=True).stdout.strip().split(";")[0]
    try:
        while time.monotonic() - start < limit:
            q = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True, text=True)
            if not q.stdout.strip():
                break
            time.sleep(0.25)
        else:
            raise AssertionError(f"job {job} still queued/running after {limit} s")
    finally:
        subprocess.run(["scancel", job], env=env, capture_output=True)
    elapsed = time.monotonic() - start
    out = next(tmp.glob(f"*-{job}.out")).read_text(errors="replace")
    return job, out, elapsed


def sbatch_for(script: Path, args: list[str], tmp: Path, **kw) -> str:
    return render("slurm", str(script), args, python=sys.executable, log_dir=str(tmp), job_name="dd", **kw).script


def test_probe_two_tasks(slurm_env, tmp_path):
    text = sbatch_for(ROOT / "scripts" / "probe.py", ["--expect-world-size", "2", "--timeout", "30"], tmp_path)
    _, out, _ = submit(slurm_env, text, tmp_path)
    print(out)
    assert "0: distdoctor probe: launcher=srun backend=gloo world_size=2 expected=2" in out, out
    assert "0: VERDICT: OK - all 2 rank(s) joined" in out
    assert "1: [probe R1/2]" in out and "LOCAL_RANK=1" in out  # SLURM_PROCID/LOCALID mapped
    assert "0: all_reduce sum: got 3.0 expected 3.0 -> OK" in out


def test_ddp_two_tasks(slurm_env, tmp_path):
    text = sbatch_for(INFRA / "ddp_train.py", ["--steps", "3", "--timeout", "30"], tmp_path)
    _, out, _ = submit(slurm_env, text, tmp_path)
    assert "0: DDP OK world=2 steps=3 weights_equal=True" in out, out
    assert "1: [" in out and "[R1/2][LR1]" in out and "CHECKPOINT 6: step 2" in out


def test_dead_task_ends_the_step(slurm_env, tmp_path):
    # rank 0 sleeps (an hour) outside any collective; rank 1 raises at step 0. Only kill-on-bad-exit ends it.
    text = sbatch_for(INFRA / "ddp_train.py", ["--hang-rank", "0", "--die-rank", "1", "--die-step", "0",
                                               "--timeout", "300"], tmp_path)
    _, out, elapsed = submit(slurm_env, text, tmp_path, limit=90)
    assert "1: [rank1]: RuntimeError: rank 1 failed at step 0" in out, out
    assert "0: " in out and "this rank hangs" in out
    assert "task 1: Exited with exit code 1" in out
    assert "task 0: Terminated" in out or "CANCELLED" in out
    assert elapsed < 80  # far below rank 0's sleep and the 300 s collective timeout


def test_srun_without_rank_mapping_is_caught(slurm_env, tmp_path):
    res = subprocess.run(["srun", "-n2", "--label", sys.executable, str(ROOT / "scripts" / "probe.py"),
                          "--expect-world-size", "2"], env=slurm_env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=90)
    assert res.returncode != 0
    for task in ("0", "1"):
        assert f"{task}: distdoctor probe: launcher=srun backend=gloo world_size=1 expected=2" in res.stdout
        assert f"{task}:   [slurm_launch] Slurm started 2 tasks (SLURM_PROCID={task})" in res.stdout
