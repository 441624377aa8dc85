"""scripts/probe.py for real: torchrun ranks, plain python, a missing rank, two ranks on one LOCAL_RANK."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distdoctor.probe import analyse
from distdoctor.runner import finished_despite_teardown_abort, run_torchrun

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "scripts" / "probe.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(text: str) -> dict:
    """The JSON document rank 0 printed: one line starting with '{"launcher"'."""
    line = [ln for ln in text.splitlines() if ln.startswith('{"launcher"')][-1]
    return json.loads(line)


def env_ranks(n: int, local_ranks: list[int | None], extra_args: list[str], port: int) -> list[subprocess.Popen]:
    procs = []
    for r, lr in zip(range(n), local_ranks):
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
        env.update(RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1")
        if lr is not None:
            env["LOCAL_RANK"] = str(lr)
        procs.append(subprocess.Popen([sys.executable, str(PROBE), *extra_args], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True))
    return procs


def finish(procs: list[subprocess.Popen], timeout: float = 60) -> list[tuple[int, str, str]]:
    out = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=timeout)
            out.append((p.returncode, o, e))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    return out


@pytest.mark.torchrun
def test_torchrun_two_ranks_ok_json():
    res = run_torchrun(PROBE, nproc=2, script_args=["--json", "--expect-world-size", "2", "--timeout", "20"],
                       timeout=90)
    # the abort at exit comes after the JSON, whose ranks below prove that both ranks reported
    assert res.ok or finished_despite_teardown_abort(res), res.output[-2000:]
    doc = last_json(res.output)
    assert doc["launcher"] == "torchrun" and doc["backend"] == "gloo" and doc["world_size"] == 2
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert [r["local_rank"] for r in doc["ranks"]] == [0, 1]
    assert all(r["device"] == "cpu" for r in doc["ranks"])
    assert doc["all_reduce"] == {"got": 3.0, "expected": 3.0, "ok": True}
    # gloo has no Work.get_future for reduce_scatter: the probe reports it instead of crashing
    assert doc["async_future"]["supported"] is False
    assert "getFuture" in doc["async_future"]["error"]
    assert [t["bytes"] for t in doc["timings"]] == [4096, 262144, 4194304]
    assert all(t["ms"] > 0 for t in doc["timings"])
    assert doc["verdict"]["ok"] is True
    assert any("share the CPU (expected on CPU" in n for n in doc["verdict"]["notes"])
    # every rank reports itself
    assert "[probe R0/2]" in res.output and "[probe R1/2]" in res.output


def test_plain_python_is_world_size_one():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_NTASKS")}
    res = subprocess.run([sys.executable, str(PROBE), "--expect-world-size", "2"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "launcher=none (plain python)" in res.stdout
    assert "[single_process_launch] WORLD_SIZE is 1 but 2 ranks were expected" in res.stdout
    assert "VERDICT: PROBLEM" in res.stdout


def test_missing_rank_is_named():
    port = free_port()
    start = time.monotonic()
    [(rc, out, err)] = finish(env_ranks(2, [0], ["--timeout", "2", "--json"], port)[:1])
    assert rc == 1, out + err
    doc = json.loads(out)
    assert doc["missing"] == [1]
    assert doc["verdict"]["problems"][0]["cause"] == "rendezvous_unreachable"
    assert "rank(s) 1 of 2 never checked in" in doc["verdict"]["problems"][0]["message"]
    assert time.monotonic() - start < 40


def test_two_ranks_on_one_local_rank_are_misbound():
    port = free_port()
    results = finish(env_ranks(2, [0, 0], ["--timeout", "20"], port))
    (rc0, out0, err0), (rc1, _, err1) = results
    assert rc0 == 1, out0 + err0
    assert rc1 == 0, err1  # rank 1 did its part; rank 0 owns the verdict
    assert "[local_rank_device] ranks 0, 1 on " in out0 and "share LOCAL_RANK 0" in out0
    assert "all_reduce sum: got 3.0 expected 3.0 -> OK" in out0  # the collectives themselves work


def test_unset_local_rank_and_shared_gpu_logic():
    """The GPU sharing rule, on reports as CUDA ranks would send them (no GPU on this machine)."""
    base = {"host": "n1", "netns": 1, "backend": "nccl", "env": {"RANK": "0"}, "bind_error": None}
    reps = {0: {**base, "rank": 0, "local_rank": 0, "device": "cuda:0", "device_uuid": "GPU-a"},
            1: {**base, "rank": 1, "local_rank": 1, "device": "cuda:0", "device_uuid": "GPU-a"}}
    v = analyse(reps, [], 2, 2, True, 3.0, "nccl")
    assert not v["ok"]
    assert any(p["cause"] == "local_rank_device" and "share one GPU" in p["message"] for p in v["problems"])
    reps[1].update(device="cuda:1", device_uuid="GPU-b")
    assert analyse(reps, [], 2, 2, True, 3.0, "nccl")["ok"]


def test_nccl_without_cuda_is_named():
    import torch
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: nccl is a valid choice")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    res = subprocess.run([sys.executable, str(PROBE), "--backend", "nccl"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 1
    assert "[nccl_without_cuda] backend nccl requested but" in res.stdout


@pytest.mark.parametrize("args,env,message", [
    (["--expect-world-size", "0"], {}, "--expect-world-size must be at least 1"),
    (["--timeout", "-1"], {}, "--timeout must be positive"),
    ([], {"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x' in the environment is not an integer"),
])
def test_bad_input(args, env, message):
    full = {**{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}, **env}
    res = subprocess.run([sys.executable, str(PROBE), *args], env=full, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert message in res.stderr
    assert "Traceback" not in res.stderr
