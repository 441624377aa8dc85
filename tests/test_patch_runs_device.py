"""int_device and local_rank_device proven by running real ranks (gloo, CPU).

int_device: `.to(local_rank)` fails on a CPU run for real; patched, both ranks train.
local_rank_device: a wrong binding cannot fail without a GPU (the failing run, `CUDA error: invalid device
ordinal`, needs one). What is proven here: two "nodes" of one process each (RANK 0/1, LOCAL_RANK 0/0,
started the way srun starts tasks, real env:// rendezvous) bind index 1 on the second node before the
patch, index LOCAL_RANK = 0 after it, and the patched program still trains on both ranks.
"""
from __future__ import annotations

import re
import shutil
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from distdoctor.patching.base import PatchOptions
from distdoctor.patching.engine import patch_source
from distdoctor.paths import ROOT, patch_module
from distdoctor.runner import RunResult, finished_ranks, run, run_torchrun, succeeded

int_device = patch_module("int_device")
local_rank_device = patch_module("local_rank_device")

PROGRAMS = ROOT / "evals" / "programs"
BIND = re.compile(r"DISTDOCTOR_BIND rank=(\d+) local_rank=(\d+) index=(\d+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes_one_task_each(script: Path) -> list[RunResult]:
    """Start RANK 0 and 1, each LOCAL_RANK 0, as a launcher on two single-GPU nodes would."""
    port = str(free_port())
    envs = [{"RANK": str(r), "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port} for r in (0, 1)]
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda env: run([sys.executable, str(script)], timeout=60, env=env), envs))


@pytest.mark.torchrun
def test_int_device_fails_on_cpu_then_patched_program_trains(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    shutil.copy(PROGRAMS / "device_int_to.py", script)
    before = run_torchrun(script, nproc=2, timeout=60, whole_lines=True)
    assert not before.ok
    assert "RuntimeError: Cannot access accelerator device when none is available." in before.output

    result = patch_source(script.read_text(), [int_device], PatchOptions(), str(script))
    assert [c.what for c in result.changes] == [
        'torch.load(map_location=): loc -> loc if torch.cuda.is_available() else "cpu"',
        ".to(): local_rank -> device",
        'torch.load(map_location=): f"cuda:{local_rank}" -> device',
        ".to(): local_rank -> device",
    ]
    script.write_text(result.new_source)
    after = run_torchrun(script, nproc=2, timeout=60)
    assert succeeded(after), after.output[-3000:]
    sums = finished_ranks(after.output)
    assert sorted(sums) == [0, 1] and sums[0] == sums[1]


@pytest.mark.torchrun
def test_local_rank_device_binds_local_rank_on_second_node(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    shutil.copy(PROGRAMS / "device_global_rank.py", script)
    before = two_nodes_one_task_each(script)
    assert all(succeeded(r) for r in before), [r.output[-1500:] for r in before]
    binds = {int(r): (int(lr), int(i)) for res in before for r, lr, i in BIND.findall(res.output)}
    assert binds == {0: (0, 0), 1: (0, 1)}  # node 2's only task would select GPU 1: the bug

    result = patch_source(script.read_text(), [local_rank_device], PatchOptions(), str(script))
    assert len(result.changes) == 2 and "int(os.environ" in result.new_source
    script.write_text(result.new_source)
    after = two_nodes_one_task_each(script)
    assert all(succeeded(r) for r in after), [r.output[-1500:] for r in after]
    binds = {int(r): (int(lr), int(i)) for res in after for r, lr, i in BIND.findall(res.output)}
    assert binds == {0: (0, 0), 1: (0, 0)}
    sums = finished_ranks("".join(r.output for r in after))
    assert sorted(sums) == [0, 1] and sums[0] == sums[1]
