"""distdoctor.tracer under real torchrun (a rank that hangs shows its stacks) and scripts/dump_stacks.py."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from distdoctor.runner import torchrun_cmd
from distdoctor.stacks import catches_signal, find_rank_processes

sys.path.insert(0, str(Path(__file__).resolve().parent / "infra"))
from distdoctor.procs import kill_tree  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^\[\d\d:\d\d:\d\d\.\d{3}\]\[\+\d+\.\d{3}s\]\[R(\d)/2\]\[LR(\d)\]\[PID:(\d+)\] CHECKPOINT (\d+): (.*)$",
                  re.M)

HANG = f'''
import os, sys, time
from datetime import timedelta
sys.path.insert(0, {str(ROOT)!r})
import torch, torch.distributed as dist
import distdoctor.tracer as T
T.watchdog(1.5)
T.checkpoint("start")
dist.init_process_group("gloo", timeout=timedelta(seconds=30))
T.checkpoint("process group ready")

def wait_for_eval_results():
    t = torch.ones(1)
    dist.all_reduce(t)

if dist.get_rank() == 0:
    T.checkpoint("rank 0 enters all_reduce")
    wait_for_eval_results()
else:
    T.checkpoint("rank 1 skips the all_reduce")
    time.sleep(120)
'''


def run_until(cmd: list[str], marker: tuple[str, ...], limit: float) -> str:
    """Run a torchrun job until a line holds every part of `marker` (or `limit` s), then kill all its processes."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    killer = threading.Timer(limit, lambda: kill_tree(proc.pid))
    killer.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            if all(part in line for part in marker):
                break
    finally:
        killer.cancel()
        kill_tree(proc.pid)  # the agent and its workers (they live in their own sessions)
        proc.wait()
    return "".join(lines)


@pytest.mark.torchrun
def test_watchdog_shows_where_the_hanging_rank_is(tmp_path):
    prog = tmp_path / "hang.py"
    prog.write_text(HANG)
    # rank 1 never joins rank 0's all_reduce: rank 0 hangs; stop once its watchdog has dumped the stacks
    out = run_until(torchrun_cmd(prog, nproc=2), ("[R0/2]", "end of stacks"), limit=90)
    cps = LINE.findall(out)
    labels = {(int(r), lbl) for r, _lr, _pid, _k, lbl in cps}
    assert (0, "rank 0 enters all_reduce") in labels and (1, "rank 1 skips the all_reduce") in labels, out[-3000:]
    assert all(r == lr for r, lr, *_ in cps)
    assert {int(k) for r, _, _, k, _ in cps if r == "0"} == {1, 2, 3}
    # rank 0's watchdog fired with a rank-prefixed header, then its stack shows where it waits
    m = re.search(r"\[R0/2\]\[LR0\]\[PID:\d+\] WATCHDOG: no checkpoint for \d+\.\ds "
                  r"\(last: CHECKPOINT 3: rank 0 enters all_reduce\); stacks of all threads", out)
    assert m, out[-3000:]
    dump = out[m.end():out.index("[R0/2][LR0]", m.end())]
    assert "in all_reduce" in dump and "in wait_for_eval_results" in dump and "hang.py" in dump


SLEEPER = f'''
import sys, time
sys.path.insert(0, {str(ROOT)!r})
import distdoctor.tracer as T
T.register_sigusr1()
T.checkpoint("sleeping")

def stuck_in_data_loading():
    time.sleep(60)

stuck_in_data_loading()
'''


def test_dump_stacks_finds_rank_and_uses_sigusr1(tmp_path):
    prog = tmp_path / "sleeper.py"
    prog.write_text(SLEEPER)
    err_path = tmp_path / "stderr.txt"
    env = {**os.environ, "RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, str(prog)], env=env, stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while "CHECKPOINT 1: sleeping" not in err_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        found = [p for p in find_rank_processes(proc.pid) if p.pid == proc.pid]
        assert found and found[0].rank == "5" and found[0].local_rank == "1" and found[0].catches_sigusr1
        res = subprocess.run([sys.executable, str(ROOT / "scripts" / "dump_stacks.py"), "--pid", str(proc.pid),
                              "--no-py-spy"], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"=== pid {proc.pid} RANK=5 LOCAL_RANK=1 WORLD_SIZE=8" in res.stdout
        assert "pip install py-spy" in res.stderr
        deadline = time.monotonic() + 10
        while "stuck_in_data_loading" not in err_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "in stuck_in_data_loading" in err_path.read_text()
        assert proc.poll() is None  # the dump did not kill it
    finally:
        proc.kill()
        proc.wait()


def test_dump_stacks_without_handler_explains(tmp_path):
    env = {**os.environ, "RANK": "3", "WORLD_SIZE": "4"}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True)
    try:
        time.sleep(0.3)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        assert not catches_signal({k: v.strip() for k, v in fields.items()}, signal.SIGUSR1)
        res = subprocess.run([sys.executable, str(ROOT / "scripts" / "dump_stacks.py"), "--pid", str(proc.pid),
                              "--no-py-spy"], capture_output=True, text=True, timeout=60)
        assert res.returncode == 1
        assert "does not catch SIGUSR1" in res.stdout
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_dump_stacks_bad_pid():
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "dump_stacks.py"), "--pid", "999999999"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "no process 999999999" in res.stderr


def test_watchdog_rejects_bad_period():
    import distdoctor.tracer as T
    with pytest.raises(ValueError, match="positive"):
        T.watchdog(0)


@pytest.mark.skipif(not shutil.which("py-spy"), reason="py-spy not installed (pip install py-spy)")
def test_dump_stacks_with_py_spy(tmp_path):
    prog = tmp_path / "sleeper.py"
    prog.write_text(SLEEPER)
    proc = subprocess.Popen([sys.executable, str(prog)], env={**os.environ, "RANK": "2", "WORLD_SIZE": "4"},
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(2)
        res = subprocess.run([sys.executable, str(ROOT / "scripts" / "dump_stacks.py"), "--pid", str(proc.pid)],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "stuck_in_data_loading" in res.stdout
    finally:
        proc.kill()
        proc.wait()
