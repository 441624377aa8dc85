"""Re-create the generated log corpus (tests/data/logs/gen_*) by running broken programs for real.

Every `gen_*` log is the combined stdout+stderr of a real run here (torch CPU build, gloo), written
next to a `.meta.yaml` sidecar naming the root cause. Usage:

    python tests/data/make_logs.py --list          # the cases, their causes and programs
    python tests/data/make_logs.py                 # re-create all of them (a few minutes)
    python tests/data/make_logs.py gen_port_in_use gen_unused_parameters

A case whose run does not show the failure it is meant to show (its `expect` strings) is not
written: the old files stay and the exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import yaml  # noqa: E402

from distdoctor.paths import ROOT  # noqa: E402
from distdoctor.runner import RunResult, run, torchrun_cmd  # noqa: E402

LOGS = ROOT / "tests" / "data" / "logs"
PROGRAMS = "evals/programs"  # relative to ROOT, so tracebacks and torchrun's summary name it that way


@dataclass
class Case:
    """One real failing run and what a correct diagnosis of its log must say."""

    name: str
    cause: str
    program: str  # file name under evals/programs
    first_failure_rank: int | None
    expect: list[str]  # substrings the output must contain, else the run did not reproduce
    nproc: int = 2
    script_args: list[str] = field(default_factory=list)
    launcher_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 60
    attempts: int = 1  # for races that only show up some of the time
    also: list[str] = field(default_factory=list)
    context: str | None = None
    notes: str | None = None
    plain_python: bool = False  # run `python program args` instead of torchrun
    per_rank_dir: bool = False  # also keep torchrun --log-dir per-rank files as <name>.d/
    cmd: Callable[["Case"], list[str]] | None = None  # a custom command line
    setup: Callable[["Case"], contextlib.AbstractContextManager] | None = None  # e.g. hold a port


def _python_cmd(case: Case) -> list[str]:
    return [sys.executable, f"{PROGRAMS}/{case.program}", *case.script_args]


def _default_cmd(case: Case) -> list[str]:
    if case.plain_python:
        return _python_cmd(case)
    return torchrun_cmd(f"{PROGRAMS}/{case.program}", case.nproc, case.script_args, case.launcher_args)


def _shown(cmd: list[str], env: dict[str, str]) -> str:
    """The command as a person would type it: `python` for this interpreter, env assignments first."""
    words = ["python" if w == sys.executable else w for w in cmd]
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (prefix + " " if prefix else "") + shlex.join(words)


@contextlib.contextmanager
def _hold_port(case: Case) -> Iterator[None]:
    """Listen on the port named in case.env['HELD_PORT'] for the duration of the run."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", int(case.env["HELD_PORT"])))
    sock.listen(1)
    try:
        yield
    finally:
        sock.close()


@contextlib.contextmanager
def _closed_port(case: Case) -> Iterator[None]:
    """Check that the port in case.env['CLOSED_PORT'] has no listener (so connecting to it fails)."""
    port = int(case.env["CLOSED_PORT"])
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            raise RuntimeError(f"port {port} is in use; pick another CLOSED_PORT for {case.name}")
    yield


@contextlib.contextmanager
def _fresh_dir(case: Case) -> Iterator[None]:
    """Give the program an empty --out directory (the path is a script argument)."""
    out = Path(case.script_args[case.script_args.index("--out") + 1])
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    try:
        yield
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _torchrun_no_dashdash(case: Case) -> list[str]:
    """torchrun with the script flags written straight after the script, without `--`, as people do."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={case.nproc}",
            *case.launcher_args, f"{PROGRAMS}/{case.program}", *case.script_args]


def _torchrun_static(case: Case) -> list[str]:
    """torchrun without --standalone (static or c10d rendezvous given by case.launcher_args)."""
    return [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={case.nproc}",
            *case.launcher_args, f"{PROGRAMS}/{case.program}", *case.script_args]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _meta(case: Case, shown: str) -> dict:
    import torch  # only for the version in the provenance line; keeps `import make_logs` light

    meta: dict = {
        "source": f"produced here: {shown}, torch {torch.__version__}, gloo",
        "expected_cause": case.cause,
        "first_failure_rank": case.first_failure_rank,
    }
    if case.also:
        meta["also"] = list(case.also)
    if case.context:
        meta["context"] = case.context
    if case.notes:
        meta["notes"] = case.notes
    meta["program"] = f"{PROGRAMS}/{case.program}"
    return meta


def produce(case: Case) -> tuple[bool, str]:
    """Run one case for real and write its log (+ per-rank folder) and meta. Returns (ok, message)."""
    env = {k: v for k, v in case.env.items() if k not in ("HELD_PORT", "CLOSED_PORT")}
    cmd = (case.cmd or _default_cmd)(case)
    logdir = None
    if case.per_rank_dir:
        logdir = Path(tempfile.mkdtemp(prefix="distdoctor-logs-"))
        i = cmd.index(f"{PROGRAMS}/{case.program}")
        cmd = cmd[:i] + ["--log-dir", str(logdir), "--redirects", "3"] + cmd[i:]
    started = time.monotonic()
    for _ in range(case.attempts):
        setup = case.setup(case) if case.setup else contextlib.nullcontext()
        with setup:
            result: RunResult = run(cmd, timeout=case.timeout, cwd=ROOT, env=env)
        missing = [s for s in case.expect if s not in result.output]
        if not missing:
            break
    took = time.monotonic() - started
    if missing:
        if logdir:
            shutil.rmtree(logdir, ignore_errors=True)
        tail = "\n".join(result.output.splitlines()[-15:])
        return False, f"{case.name}: output lacks {missing!r} (rc={result.returncode}); tail:\n{tail}"
    shown = _shown(cmd, env)
    if logdir:
        shown = shown.replace(str(logdir), "LOGDIR")
        _copy_rank_files(logdir, LOGS / f"{case.name}.d")
    _write_atomic(LOGS / f"{case.name}.log", result.output)
    _write_atomic(LOGS / f"{case.name}.meta.yaml",
                  yaml.safe_dump(_meta(case, shown), sort_keys=False, allow_unicode=True, width=100))
    state = "timed out" if result.timed_out else f"rc={result.returncode}"
    return True, f"{case.name}: {state}, {len(result.output.splitlines())} lines, {took:.1f}s"


def _copy_rank_files(logdir: Path, dest: Path) -> None:
    """Keep torchrun's `<run id>/attempt_0/<rank>/{stdout,stderr}.log` as `dest/attempt_0/<rank>/...`."""
    runs = [p for p in logdir.iterdir() if p.is_dir()]
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(runs[0], tmp)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    shutil.rmtree(logdir, ignore_errors=True)


ECHO = "Connection closed by peer"

CASES: list[Case] = [
    Case("gen_peer_died_valueerror", "peer_died_first", "fail_rank_raises.py", 1,
         expect=["ValueError: bad batch", ECHO, "ChildFailedError"],
         script_args=["--bad-rank", "1"],
         notes="rank 1 raises ValueError in its step; rank 0 then fails in all_reduce with gloo "
               "'Connection closed by peer' (an echo); torchrun SIGTERMs the rest."),
    Case("gen_peer_died_4ranks", "peer_died_first", "fail_rank_raises.py", 2,
         expect=["ValueError: bad batch", "ChildFailedError"], nproc=4,
         script_args=["--bad-rank", "2"],
         notes="4 ranks, rank 2 raises; the echoes from ranks 0, 1 and 3 take more lines than the cause."),
    Case("gen_peer_died_logdir", "peer_died_first", "fail_rank_raises.py", 1,
         expect=["ChildFailedError"], script_args=["--bad-rank", "1"], per_rank_dir=True,
         notes="--log-dir with --redirects 3: the console (this .log) has only the agent's summary; the "
               "rank output is in gen_peer_died_logdir.d/attempt_0/<rank>/stderr.log."),
    Case("gen_rank0_allreduce", "rank_conditional_collective", "fail_rank0_allreduce.py", 0,
         expect=["Timed out waiting 5000ms"],
         notes="all_reduce under `if rank == 0`; gloo times out on rank 0 after the 5 s group timeout, "
               "the agent then SIGTERMs rank 1."),
    Case("gen_ddp_generate_rank0", "rank_conditional_collective", "fail_ddp_generate_rank0.py", 0,
         expect=["_sync_buffers", "Timed out waiting"],
         context="generation after training runs on rank 0 only",
         notes="DDP forward on rank 0 only (generation); DDP broadcasts BatchNorm buffers in forward, so "
               "rank 0 waits in _broadcast_coalesced while rank 1 waits in a barrier; both time out."),
    Case("gen_gloo_get_future", "gloo_missing_feature", "fail_gloo_get_future.py", 0,
         expect=["Work::getFuture not implemented"],
         notes="reduce_scatter(async_op=True).get_future() on gloo; every rank fails the same way."),
    Case("gen_nccl_not_built", "nccl_without_cuda", "fail_nccl_on_cpu.py", 1,
         expect=["Distributed package doesn't have NCCL built in"], script_args=["--variant", "nccl"],
         notes="init_process_group('nccl') on the CPU build of torch; no [rankN]: prefix because the "
               "process group never came up. first_failure_rank is whichever rank torchrun saw first."),
    Case("gen_nccl_compound_backend", "nccl_without_cuda", "fail_nccl_on_cpu.py", 1,
         expect=["Distributed package doesn't have NCCL built in", "cpu:gloo,cuda:nccl"],
         script_args=["--variant", "compound"],
         notes="init_process_group('cpu:gloo,cuda:nccl') on the CPU build fails the same way as plain nccl."),
    Case("gen_gloo_device_id_cuda", "nccl_without_cuda", "fail_nccl_on_cpu.py", 0,
         expect=["does not match the current compilation's accelerator support"],
         script_args=["--variant", "device_id"],
         notes="init_process_group('gloo', device_id=torch.device('cuda', LOCAL_RANK)) on a CPU build: "
               "the backend was switched to gloo but the CUDA device_id was left in."),
    Case("gen_ddp_device_ids_cpu", "nccl_without_cuda", "fail_nccl_on_cpu.py", 0,
         expect=["device_ids and output_device arguments only work with"],
         script_args=["--variant", "ddp_device_ids"],
         notes="DDP(cpu_module, device_ids=[LOCAL_RANK]) after switching to gloo/CPU: the CUDA-only "
               "device_ids argument was left in."),
    Case("gen_port_in_use_torchrun", "port_in_use", "fail_port_in_use.py", None,
         expect=["EADDRINUSE"], cmd=_torchrun_static, setup=_hold_port,
         launcher_args=["--nnodes=1", "--master-port=29561"], env={"HELD_PORT": "29561"},
         notes="another process listens on 127.0.0.1:29561 while torchrun --master-port=29561 starts; "
               "the agent's TCPStore cannot listen; no worker is started."),
    Case("gen_port_in_use_env", "port_in_use", "fail_port_in_use.py", 0,
         expect=["EADDRINUSE"], plain_python=True, setup=_hold_port,
         env={"HELD_PORT": "29562", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29562", "RANK": "0",
              "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
         notes="rank 0 started by hand (env://) with MASTER_PORT already taken by another process."),
    Case("gen_unused_parameters", "unused_parameters", "fail_unused_parameters.py", 0,
         expect=["Expected to have finished reduction in the prior iteration"],
         notes="DDP without find_unused_parameters over a model with a layer forward never uses; both "
               "ranks fail on the second forward."),
    Case("gen_sigkill_rank1", "peer_died_first", "fail_sigkill.py", 1,
         expect=["SIGKILL", ECHO], script_args=["--bad-rank", "1"], launcher_args=["--monitor-interval=1"],
         notes="rank 1 gets SIGKILL (exitcode -9) with no message of its own, as from the OOM killer or "
               "a scheduler; the log alone cannot tell OOM from another kill, so oom_one_rank is not "
               "claimed. Rank 0's 'Connection closed by peer' is an echo."),
    Case("gen_mp_spawn_zero_gpus", "single_process_launch", "fail_mp_spawn_cuda_count.py", None,
         expect=["spawning 0 workers", "training finished"], plain_python=True,
         context="python train.py on a machine without GPUs; it finished instantly",
         notes="mp.spawn(nprocs=torch.cuda.device_count()) is mp.spawn(nprocs=0) on CPU: no worker "
               "runs, nothing fails, exit status 0."),
    Case("gen_uneven_batches", "dataloader_uneven", "fail_uneven_batches.py", 1,
         expect=["Received data size doesn't match expected size"],
         also=["peer_died_first"],
         notes="5 shards split rank::world: rank 0 has 3 batches, rank 1 has 2. Rank 1 leaves the loop "
               "and its all_reduce meets rank 0's DDP gradient bucket: gloo aborts rank 1 (SIGABRT, "
               "'Received data size doesn't match'), then rank 0 sees 'Connection reset by peer'."),
    Case("gen_compile_head_dim", "shape_config_error", "fail_compile_head_dim.py", 0,
         expect=["Dynamo failed to run FX node with fake tensors", "is invalid for input of size"],
         timeout=120,
         notes="d_model=104 with head_dim=12 (104 is not a multiple of 12) under torch.compile; every "
               "rank fails the same way in dynamo tracing."),
    Case("gen_launcher_run_ambiguous", "launcher_args", "fail_launcher_flag.py", None,
         expect=["ambiguous option: --run could match --run-path, --run_path"], cmd=_torchrun_no_dashdash,
         script_args=["--device-type", "cpu", "--run", "test"],
         notes="the script's own --run flag, written after the script name without `--`, is still "
               "parsed by torchrun as an abbreviation of --run-path/--run_path; torchrun exits 2 before "
               "starting any worker."),
    Case("gen_launcher_dashdash_middle", "launcher_args", "fail_launcher_flag.py", 0,
         expect=["unrecognized arguments: -- --run test"], cmd=_torchrun_no_dashdash,
         script_args=["--device-type", "cpu", "--", "--run", "test"],
         notes="`--` put between script flags (not right after the script name) is passed through to "
               "the script, whose argparse rejects it; every rank exits 2."),
    Case("gen_meta_device", "device_mismatch", "fail_meta_device.py", 0,
         expect=["Tensor on device meta is not on the expected device cpu"],
         notes="model created under torch.device('meta') and never materialised, fed a CPU batch. A "
               "CPU-only build cannot show 'Expected all tensors to be on the same device' (that needs "
               "two real devices); this is its CPU-side equivalent."),
    Case("gen_detail_debug_segfault", "collective_timeout", "fail_ddp_generate_rank0.py", 0,
         expect=["SIGSEGV"], env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         also=["rank_conditional_collective"],
         context="set TORCH_DISTRIBUTED_DEBUG=DETAIL to find why generation after training hangs",
         notes="with TORCH_DISTRIBUTED_DEBUG=DETAIL every rank dies with SIGSEGV (exitcode -11) at DDP "
               "construction on gloo, torch 2.13 CPU, before any step and with no Python traceback. "
               "The desync toolkit itself crashes here; no taxonomy id names that yet (see README)."),
    Case("gen_monitored_barrier", "collective_timeout", "fail_monitored_barrier.py", 0,
         expect=["failed to pass monitoredBarrier"],
         notes="rank 1 is busy (a sleep) and misses a monitored_barrier(timeout=3s); rank 0 names "
               "rank 1 but nothing says why it was late."),
    Case("gen_makedirs_race", "download_race", "fail_makedirs_race.py", 1,
         expect=["FileExistsError"], script_args=["--out", "/tmp/distdoctor-makedirs-race"],
         setup=_fresh_dir, attempts=3,
         notes="both ranks see that the cache directory does not exist, then both os.makedirs it "
               "without exist_ok; the slower one gets FileExistsError. Which rank loses is timing."),
    Case("gen_checkpoint_no_barrier", "checkpoint_all_ranks", "fail_checkpoint_all_ranks.py", 1,
         expect=["saving checkpoint", "[rank1]:", "ChildFailedError"],
         script_args=["--out", "/tmp/distdoctor-ckpt-no-barrier"], setup=_fresh_dir, attempts=3,
         notes="rank 0 alone saves a 16 MB checkpoint; rank 1 polls for the file instead of waiting at a "
               "barrier and torch.load reads it half-written."),
    Case("gen_rendezvous_env_closed_port", "rendezvous_unreachable", "fail_port_in_use.py", 1,
         expect=["has timed out after", "while trying to connect to"], plain_python=True,
         setup=_closed_port,
         env={"CLOSED_PORT": "29599", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29599", "RANK": "1",
              "WORLD_SIZE": "2", "LOCAL_RANK": "1"},
         notes="rank 1 started by hand (env://) with MASTER_ADDR:MASTER_PORT where no rank 0 listens; "
               "the TCPStore client gives up after the 10 s init timeout."),
    Case("gen_rendezvous_c10d_unreachable", "rendezvous_unreachable", "fail_port_in_use.py", None,
         expect=["RendezvousTimeoutError"], cmd=_torchrun_static, setup=_closed_port, timeout=120,
         launcher_args=["--nnodes=2", "--node-rank=1", "--rdzv-backend=c10d",
                        "--rdzv-endpoint=127.0.0.2:29598", "--rdzv-conf=read_timeout=5,join_timeout=10"],
         env={"CLOSED_PORT": "29598"},
         notes="the second node's torchrun points at a rendezvous endpoint where nothing listens; the "
               "agent gives up after join_timeout=10 s. No worker is started."),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="cases to re-create (default: all)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    by_name = {c.name: c for c in CASES}
    if args.list:
        for c in CASES:
            print(f"{c.name:34} {c.cause:28} {c.program}")
        return 0
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        print(f"make_logs: unknown case(s): {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    chosen = [by_name[n] for n in args.names] if args.names else CASES
    LOGS.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, case in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {case.name} ...", file=sys.stderr, flush=True)
        ok, message = produce(case)
        failed += not ok
        print(("  ok " if ok else "  FAILED ") + message, file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
