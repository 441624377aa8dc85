"""Re-create the log corpus in tests/data/logs: gen_* by running broken programs for real, field_* from reports.

Every `gen_*` log is the combined stdout+stderr of a real run here (torch CPU build, gloo) of a program
in evals/programs/, written next to a `.meta.yaml` sidecar naming the root cause. Every `field_*` log
is a verbatim excerpt of a field report in ../shared/field-reports/. Usage:

    python tests/data/make_logs.py --list          # the cases, their causes and programs
    python tests/data/make_logs.py                 # re-create all of them (about 6 minutes on 2 cores)
    python tests/data/make_logs.py gen_port_in_use_torchrun gen_unused_parameters
    python tests/data/make_logs.py --readme        # only rewrite tests/data/logs/README.md

A case whose run does not show the failure it is meant to show (its `expect` strings) is not
written: the old files stay and the exit status is 1. Unknown names: exit status 2.
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
from distdoctor.runner import RunResult, run, torchrun_cmd, with_open_files_limit  # noqa: E402

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


def command(case: Case) -> list[str]:
    """The command line that runs a case (its own, or torchrun / python on its program)."""
    return (case.cmd or _default_cmd)(case)

def _shown(cmd: list[str], env: dict[str, str]) -> str:
    """The command as a person would type it: `python` for this interpreter, env assignments first."""
    words = ["python" if w == sys.executable else w.replace(sys.executable + " ", "python ") for w in cmd]
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
    with _fresh_dir_at(Path(case.script_args[case.script_args.index("--out") + 1])):
        yield


@contextlib.contextmanager
def _stale_node_config(case: Case) -> Iterator[None]:
    """Write --config-dir/node0.json (current) and node1.json (a stale copy with one layer less)."""
    with _fresh_dir_at(Path(case.script_args[case.script_args.index("--config-dir") + 1])) as out:
        (out / "node0.json").write_text('{"width": 32, "n_layer": 3}\n', encoding="utf-8")
        (out / "node1.json").write_text('{"width": 32, "n_layer": 2}\n', encoding="utf-8")
        yield


@contextlib.contextmanager
def _fresh_dir_at(out: Path) -> Iterator[Path]:
    """An empty directory at `out` for the duration of the run, removed afterwards."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    try:
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _torchrun_no_dashdash(case: Case) -> list[str]:
    """torchrun with the script flags written straight after the script, without `--`, as people do."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={case.nproc}",
            *case.launcher_args, f"{PROGRAMS}/{case.program}", *case.script_args]


def _torchrun_node1_of_two(case: Case) -> list[str]:
    """Two torchrun agents on this machine as nodes 0 and 1 of one job (static rendezvous); the log is
    node 1's console, where local rank L is global rank nproc + L. Node 0's output is discarded."""
    port = str(_free_port())
    def node(rank: int) -> str:
        return shlex.join([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={case.nproc}",
                           "--nnodes=2", f"--node-rank={rank}", "--master-addr=127.0.0.1", f"--master-port={port}",
                           *case.launcher_args, f"{PROGRAMS}/{case.program}", "--", *case.script_args])
    return ["bash", "-c", f"{node(0)} >/dev/null 2>&1 & {node(1)}; wait"]


LOGDIR_MARK = "@LOGDIR@"  # where a custom command puts torchrun's --log-dir (produce() fills it in)
RAW_MARK = "@RAWOUT@"  # a custom command that writes its log there itself: kept byte for byte (\r, CRLF)


def _two_nodes_c10d_logdir(case: Case) -> list[str]:
    """Two torchrun agents on this machine as the two nodes of one job (--nnodes=2, c10d rendezvous on
    127.0.0.1), each with its own --log-dir (LOGDIR/node0, LOGDIR/node1) and --redirects 3; both consoles are
    the log. c10d gives the agents their ranks in the order they join: which folder holds ranks 2-3 varies."""
    port = str(_free_port())
    def node(rank: int) -> str:
        return shlex.join([sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={case.nproc}",
                           "--nnodes=2", f"--node-rank={rank}", "--rdzv-backend=c10d",
                           f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=job7", *case.launcher_args,
                           "--log-dir", f"{LOGDIR_MARK}/node{rank}", "--redirects", "3",
                           f"{PROGRAMS}/{case.program}", "--", *case.script_args])
    return ["bash", "-c", f"{node(0)} & {node(1)}; wait"]


def _srun_torchrun(case: Case) -> list[str]:
    """`srun -n2 --label torchrun ...`: two Slurm tasks, each a torchrun agent of one 2-node job (c10d
    rendezvous on 127.0.0.1), as sbatch scripts for several nodes run it. Needs Slurm (tests/infra/slurm.sh
    start, SLURM_CONF in the environment). srun's label is the task id: a node here, not a rank."""
    port = str(_free_port())
    return ["srun", "-n2", "--label", "--kill-on-bad-exit=1", "env", *(f"{k}={v}" for k, v in case.env.items()),
            sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={case.nproc}", "--nnodes=2",
            "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=job8", *case.launcher_args,
            f"{PROGRAMS}/{case.program}", *case.script_args]


def _srun_python(case: Case) -> list[str]:
    """`srun -n2 --label` with one task per rank (no torchrun): each task maps Slurm's ids to torch's env:// variables.
    Needs Slurm, as _srun_torchrun."""
    port = str(_free_port())
    env = " ".join(f"{k}={v}" for k, v in case.env.items())
    inner = (f"export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS MASTER_ADDR=127.0.0.1 "
             f"MASTER_PORT={port} {env}; exec {shlex.join([sys.executable, f'{PROGRAMS}/{case.program}', *case.script_args])}")
    return ["srun", "-n2", "--label", "--kill-on-bad-exit=1", "bash", "-c", inner]


def _torchrun_gpu_count(case: Case) -> list[str]:
    """torchrun --nproc_per_node=gpu: torchrun counts the GPUs itself."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=gpu",
            *case.launcher_args, f"{PROGRAMS}/{case.program}", *case.script_args]


def _two_plain_ranks(case: Case) -> list[str]:
    """Ranks 0 and 1 started by hand with `python` (env:// rendezvous, rank 0 hosts the TCPStore), no launcher."""
    port = str(_free_port())
    def rank(r: int) -> str:
        env = f"MASTER_ADDR=127.0.0.1 MASTER_PORT={port} RANK={r} WORLD_SIZE=2 LOCAL_RANK={r}"
        return f"{env} {shlex.join([sys.executable, f'{PROGRAMS}/{case.program}', *case.script_args])}"
    return ["bash", "-c", f"{rank(0)} & {rank(1)}; wait"]


def _two_c10d_nodes(case: Case) -> list[str]:
    """Two torchrun agents on this machine as nodes 0 and 1 (c10d rendezvous, one worker each), both consoles in
    the log; node 0 starts first so that its agent hosts the store. An agent stops only its own workers."""
    port = str(_free_port())
    def node(rank: int) -> str:
        return shlex.join([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={rank}",
                           f"--nproc_per_node={case.nproc}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                           f"{PROGRAMS}/{case.program}", *case.script_args])
    return ["bash", "-c", f"{node(0)} & sleep 3; {node(1)}; wait"]


def _piped(stage: str, raw: bool = False) -> Callable[[Case], list[str]]:
    """torchrun with its combined output piped through `stage`, as a log collector, a wrapper or a user's shell
    puts something in front of each line (`ts` needs moreutils); `raw`: the log is kept byte for byte."""
    def cmd(case: Case) -> list[str]:
        inner = shlex.join(_default_cmd(case))
        out = f" > {RAW_MARK}" if raw else ""
        return ["bash", "-c", f"set -o pipefail; ({inner}) 2>&1 | {stage}{out}"]
    return cmd


# a wrapper that puts the wall clock in front of each line it passes on: [06:40:01] ...
CLOCK_STAMP = (f"{shlex.quote(sys.executable)} -u -c \"import sys, datetime\n"
               f"for l in sys.stdin: print(datetime.datetime.now().strftime('[%H:%M:%S]'), l, end='')\"")


def _legacy_launch(case: Case) -> list[str]:
    """The deprecated `python -m torch.distributed.launch --use-env` (torchrun under another name)."""
    return [sys.executable, "-m", "torch.distributed.launch", "--use-env", f"--nproc_per_node={case.nproc}",
            *case.launcher_args, f"{PROGRAMS}/{case.program}", *case.script_args]


def _srun_tasks_ts_files(case: Case) -> list[str]:
    """`srun -n N -O -o <dir>/rank_%t.log` with one task per rank (env:// from Slurm's ids), each task's output
    piped through moreutils `ts` into its own file; the log is those files joined with `cat`, rank after rank.
    Needs Slurm (as _srun_torchrun) and moreutils (apt-get install moreutils)."""
    port = str(_free_port())
    out = "/tmp/distdoctor-srun-ts"
    inner = (f"export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS MASTER_ADDR=127.0.0.1 "
             f"MASTER_PORT={port}; {shlex.join([sys.executable, f'{PROGRAMS}/{case.program}', *case.script_args])}"
             f" 2>&1 | ts '%Y-%m-%d %H:%M:%.S'")
    return ["bash", "-c", f"rm -rf {out}; mkdir -p {out}; srun -n{case.nproc} -O -o {out}/rank_%t.log "
                          f"{shlex.join(['bash', '-c', inner])}; cat {out}/rank_*.log"]


def _srun_many_tasks(case: Case) -> list[str]:
    """`srun -n N -O --label` with one task per rank on one node (-O: more tasks than CPUs); N > 10 pads labels."""
    port = str(_free_port())
    inner = (f"export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS MASTER_ADDR=127.0.0.1 "
             f"MASTER_PORT={port}; exec {shlex.join([sys.executable, f'{PROGRAMS}/{case.program}', *case.script_args])}")
    return ["srun", f"-n{case.nproc}", "-O", "--label", "--kill-on-bad-exit=1", "bash", "-c", inner]


def _rank_files(join: str) -> Callable[[Case], list[str]]:
    """N ranks started by hand with `python` (env://, no launcher), each writing its own file logs/rank_<r>.log
    (as `python train.py > logs/rank_$RANK.log 2>&1` does); the log is those files joined by `join`, run in the
    folder above logs/ (`tail -n +1 logs/rank_*.log` puts "==> logs/rank_1.log <==" between them, `grep -r ''
    logs/` puts "logs/rank_1.log:" in front of each line)."""
    def cmd(case: Case) -> list[str]:
        port = str(_free_port())
        out = "/tmp/distdoctor-rank-files"
        prog = shlex.join([sys.executable, f"{PROGRAMS}/{case.program}", *case.script_args])
        ranks = " ".join(f"RANK={r} LOCAL_RANK={r} WORLD_SIZE={case.nproc} MASTER_ADDR=127.0.0.1 MASTER_PORT={port} "
                         f"{prog} > {out}/logs/rank_{r}.log 2>&1 &" for r in range(case.nproc))
        return ["bash", "-c", f"rm -rf {out}; mkdir -p {out}/logs; {ranks} wait; cd {out}; {join}"]
    return cmd


def _srun_output_files(case: Case) -> list[str]:
    """`srun -n N -O --kill-on-bad-exit=1 -o out/%j_%t.out` (an sbatch script's `#SBATCH --output=%j_%t.out`, one
    file per task) with one task per rank; the log is srun's own console (its `srun: error:` and slurmstepd lines)
    followed by the task files joined with `tail -n +1 out/*.out` ("==> out/12_1.out <==" headers)."""
    port = str(_free_port())
    out = "/tmp/distdoctor-srun-out"
    inner = (f"export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS MASTER_ADDR=127.0.0.1 "
             f"MASTER_PORT={port}; exec {shlex.join([sys.executable, f'{PROGRAMS}/{case.program}', *case.script_args])}")
    return ["bash", "-c", f"rm -rf {out}; mkdir -p {out}/out; srun -n{case.nproc} -O --kill-on-bad-exit=1 "
                          f"-o '{out}/out/%j_%t.out' {shlex.join(['bash', '-c', inner])}; cd {out}; tail -n +1 out/*.out"]


# a collector that keeps each line as one JSON object, as Docker's json-file driver does: {"log": "<line>\n",
# "stream": "stdout", "time": "<UTC, ns>Z"} (torchrun's stderr merged into stdout first)
JSON_FILE_STAMP = (f"{shlex.quote(sys.executable)} -u -c \"import sys, json, datetime\n"
                   f"for l in sys.stdin: print(json.dumps({{'log': l, 'stream': 'stdout', 'time': "
                   f"datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%f000Z')}}))\"")


def _two_nodes_files_tail(case: Case) -> list[str]:
    """Two torchrun agents on this machine as nodes 0 and 1 (c10d rendezvous), each console into its own file
    (as two pods' or two hosts' logs are kept), shown with `tail -n +1 node0.log node1.log` ("==> node0.log <==")."""
    port = str(_free_port())
    out = "/tmp/distdoctor-node-files"
    def node(rank: int) -> str:
        return shlex.join([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={rank}",
                           f"--nproc_per_node={case.nproc}", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                           *case.launcher_args, f"{PROGRAMS}/{case.program}", *case.script_args]) + f" > {out}/node{rank}.log 2>&1"
    return ["bash", "-c", f"rm -rf {out}; mkdir -p {out}; {node(0)} & sleep 3; {node(1)}; wait; cd {out}; "
                          f"tail -n +1 node0.log node1.log"]


def _low_fd_limit(case: Case) -> list[str]:
    """torchrun under `ulimit -n 128`."""
    return with_open_files_limit(_default_cmd(case), 128)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    cmd = command(case)
    if cmd[0] == "srun":
        if not shutil.which("srun") or "SLURM_CONF" not in os.environ:
            return False, f"{case.name}: needs Slurm (bash tests/infra/slurm.sh start; export SLURM_CONF=...)"
        env = {}  # srun passes them through `env` to its tasks (shown in the command)
    logdir = None
    if case.per_rank_dir:
        logdir = Path(tempfile.mkdtemp(prefix="distdoctor-logs-"))
        if any(LOGDIR_MARK in w for w in cmd):  # the command places its own --log-dir folders
            cmd = [w.replace(LOGDIR_MARK, str(logdir)) for w in cmd]
        else:
            i = cmd.index(f"{PROGRAMS}/{case.program}")
            cmd = cmd[:i] + ["--log-dir", str(logdir), "--redirects", "3"] + cmd[i:]
    raw = None
    if any(RAW_MARK in w for w in cmd):  # run()'s text mode would turn \r and \r\n into \n
        raw = Path(tempfile.mkdtemp(prefix="distdoctor-raw-")) / "out.log"
        cmd = [w.replace(RAW_MARK, str(raw)) for w in cmd]
    started = time.monotonic()
    for _ in range(case.attempts):
        setup = case.setup(case) if case.setup else contextlib.nullcontext()
        with setup:
            result: RunResult = run(cmd, timeout=case.timeout, cwd=ROOT, env=env)
        if raw is not None:
            result.output = raw.read_bytes().decode("utf-8", "replace")
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
    if raw is not None:
        shown = shown.replace(str(raw), "OUT.log")
        shutil.rmtree(raw.parent, ignore_errors=True)
    if logdir:
        shown = shown.replace(str(logdir), "LOGDIR")
        _copy_rank_files(logdir, LOGS / f"{case.name}.d")
    if raw is not None:
        (LOGS / f"{case.name}.log").write_bytes(result.output.encode("utf-8"))
    else:
        _write_atomic(LOGS / f"{case.name}.log", result.output)
    _write_atomic(LOGS / f"{case.name}.meta.yaml",
                  yaml.safe_dump(_meta(case, shown), sort_keys=False, allow_unicode=True, width=100))
    state = "timed out" if result.timed_out else f"rc={result.returncode}"
    return True, f"{case.name}: {state}, {len(result.output.splitlines())} lines, {took:.1f}s"


def _copy_rank_files(logdir: Path, dest: Path) -> None:
    """Keep torchrun's `<run id>/attempt_0/<rank>/{stdout,stderr}.log` as `dest/attempt_0/<rank>/...` (and
    `node0/<run id>/attempt_0/...` of a command with a folder per node as `dest/node0/attempt_0/...`): the run
    id (random) is dropped."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for attempt in sorted(logdir.glob("**/attempt_*")):
        run_dir = attempt.parent
        shutil.copytree(attempt, tmp / run_dir.parent.relative_to(logdir) / attempt.name)
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
         expect=["ValueError: bad batch", "ChildFailedError", "[rank0]:", "[rank1]:", "[rank3]:"], nproc=4,
         script_args=["--bad-rank", "2"], launcher_args=["--monitor-interval=1"], attempts=3,
         notes="4 ranks, rank 2 raises; the echoes from ranks 0, 1 and 3 (gloo 'Connection closed by peer' "
               "or 'Connection reset by peer' tracebacks) take more lines than the cause."),
    Case("gen_peer_died_tee", "peer_died_first", "fail_rank_raises.py", 1,
         expect=["[default1]:", "ValueError: bad batch"], script_args=["--bad-rank", "1"],
         launcher_args=["--tee", "3"],
         notes="torchrun --tee 3: every worker line is prefixed [default<local rank>]: (role 'default')."),
    Case("gen_peer_died_filtered", "peer_died_first", "fail_rank_raises.py", 1,
         expect=["[default0]:", ECHO, "rank      : 1 (local_rank: 1)"], script_args=["--bad-rank", "1"],
         launcher_args=["--tee", "3", "--local-ranks-filter", "0"], attempts=3,
         notes="--tee 3 --local-ranks-filter 0 (only rank 0's output on the console): rank 1's ValueError "
               "is not in the log at all; rank 0's 'Connection closed by peer' and torchrun's summary "
               "(root cause rank 1, exitcode 1) are the only evidence."),
    Case("gen_peer_died_role", "peer_died_first", "fail_rank_raises.py", 0,
         expect=["[trainer0]:", "ValueError: bad batch"], script_args=["--bad-rank", "0"],
         launcher_args=["--role", "trainer", "--tee", "3"],
         notes="torchrun --role trainer --tee 3: lines are prefixed [trainer<local rank>]:; rank 0 raises."),
    Case("gen_peer_died_logdir", "peer_died_first", "fail_rank_raises.py", 1,
         expect=["ChildFailedError"], script_args=["--bad-rank", "1"], per_rank_dir=True,
         notes="--log-dir with --redirects 3: the console (this .log) has only the agent's summary; the "
               "rank output is in gen_peer_died_logdir.d/attempt_0/<rank>/stderr.log."),
    Case("gen_rank0_allreduce", "rank_conditional_collective", "fail_rank0_allreduce.py", 0,
         expect=["Timed out waiting 5000ms"],
         notes="all_reduce under `if rank == 0`; gloo times out on rank 0 after the 5 s group timeout, "
               "the agent then SIGTERMs rank 1."),
    Case("gen_recv_unmatched", "rank_conditional_collective", "fail_recv_unmatched.py", 1,
         expect=["Connection closed by peer"], attempts=3,
         notes="rank 0 sends on even steps only and exits cleanly after its loop; rank 1, in dist.recv for "
               "step 1, reads the closed socket; torchrun lists rank 1 alone (the race where the socket is reset "
               "first is kept as race_recv_unmatched_reset)."),
    Case("gen_rank0_allreduce_logdir", "rank_conditional_collective", "fail_rank0_allreduce.py", 0,
         expect=["ChildFailedError"], per_rank_dir=True,
         notes="gen_rank0_allreduce with --log-dir and --redirects 3: the console (this .log) has only the "
               "agent's summary; rank 0's timeout is in gen_rank0_allreduce_logdir.d/attempt_0/0/stderr.log."),
    Case("gen_rank0_allreduce_peer_exits", "rank_conditional_collective", "fail_rank0_allreduce.py", 0,
         expect=[ECHO], script_args=["--then", "exit"],
         notes="all_reduce under `if rank == 0` while rank 1 finishes cleanly and exits: rank 0 gets gloo "
               "'Connection closed by peer' and torchrun names rank 0 as root cause, yet no peer crashed "
               "(rank 1 printed 'exiting' and exited 0). Looks like peer_died_first; it is not."),
    Case("gen_rank0_allreduce_then_broadcast", "rank_conditional_collective", "fail_rank0_allreduce.py", None,
         expect=["Timed out waiting", "dist.broadcast(weights"], script_args=["--then", "broadcast"],
         notes="all_reduce under `if rank == 0`, then every rank broadcasts the weights: rank 0 waits in its "
               "all_reduce, rank 1 in the broadcast, both time out after 5 s."),
    Case("gen_rank0_allreduce_detail", "rank_conditional_collective", "fail_rank0_allreduce.py", None,
         expect=["Detected mismatch between collectives on ranks"], script_args=["--then", "broadcast"],
         env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         notes="same program as gen_rank0_allreduce_then_broadcast with TORCH_DISTRIBUTED_DEBUG=DETAIL: the "
               "collective fingerprints name ALLREDUCE on rank 0 vs BROADCAST on rank 1."),
    Case("gen_rank0_allreduce_detail_sleep", "rank_conditional_collective", "fail_rank0_allreduce.py", 0,
         expect=["failed to pass monitoredBarrier"], env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         notes="same program as gen_rank0_allreduce with TORCH_DISTRIBUTED_DEBUG=DETAIL: rank 0's all_reduce "
               "reports 'Ranks 1 failed to pass monitoredBarrier' (DETAIL wraps each collective in one)."),
    Case("gen_shape_mismatch_split_detail", "collective_shape_mismatch", "fail_shape_mismatch_split.py", None,
         expect=["Detected mismatch between collectives on ranks", "OpType=_ALLGATHER_BASE", "Tensor Tensor shapes"],
         env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         notes="a 2871-token sequence split with tensor_split over 2 ranks (1436 and 1435 tokens, no padding), then "
               "all_gather_into_tensor on every rank: DETAIL names the same op (_ALLGATHER_BASE) at the same "
               "sequence number with shapes [1436, 16] vs [1435, 16]. Every rank fails the same way."),
    Case("gen_shape_mismatch_bincount_detail", "collective_shape_mismatch", "fail_shape_mismatch_eval.py", None,
         expect=["Detected mismatch between collectives on ranks", "OpType=ALLREDUCE", "Tensor Tensor shapes"],
         script_args=["--collective", "all_reduce"], env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         notes="per-class prediction counts from torch.bincount without minlength are all_reduced: one rank's "
               "count tensor is shorter (the largest class it predicted is smaller). Same op, same sequence "
               "number, TensorShape [5] vs [4]."),
    Case("gen_shape_mismatch_gather_detail", "collective_shape_mismatch", "fail_shape_mismatch_eval.py", None,
         expect=["Detected mismatch between collectives on ranks", "OpType=ALLGATHER", "Tensor Tensor shapes"],
         env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         notes="101 validation samples split rank::world (51 and 50), per-sample losses all_gathered into buffers "
               "shaped like the local losses: same op, TensorShape [51] vs [50]."),
    Case("gen_ddp_generate_rank0", "rank_conditional_collective", "fail_ddp_generate_rank0.py", None,
         expect=["_sync_buffers", "Timed out waiting"],
         context="generation after training runs on rank 0 only",
         notes="DDP forward on rank 0 only (generation); DDP broadcasts BatchNorm buffers in forward, so "
               "rank 0 waits in _broadcast_coalesced while rank 1 waits in a barrier; both time out."),
    Case("gen_ddp_generate_rank0_allreduce", "rank_conditional_collective", "fail_ddp_generate_rank0.py", None,
         expect=["_sync_buffers", "[rank1]:"], script_args=["--then", "allreduce"],
         context="generation after training runs on rank 0 only",
         notes="as gen_ddp_generate_rank0, but rank 1 then all_reduces a final metric: gloo pairs it with "
               "rank 0's buffer broadcast; here rank 0 fails with 'Application timeout caused pair closure' "
               "and rank 1 with a send timeout (the exact texts depend on timing)."),
    Case("gen_gloo_get_future", "gloo_missing_feature", "fail_gloo_get_future.py", None,
         expect=["Work::getFuture not implemented"],
         notes="reduce_scatter(async_op=True).get_future() on gloo; every rank fails the same way."),
    Case("gen_nccl_not_built", "nccl_without_cuda", "fail_nccl_on_cpu.py", None,
         expect=["Distributed package doesn't have NCCL built in"], script_args=["--variant", "nccl"],
         notes="init_process_group('nccl') on the CPU build of torch; no [rankN]: prefix because the "
               "process group never came up. Every rank fails the same way; torchrun's 'root cause' is "
               "whichever it saw first, so first_failure_rank is null."),
    Case("gen_cpu_run_no_process_group", "nccl_without_cuda", "backend_nanochat.py", None,
         expect=["Default process group has not been initialized", "local_rank: 1"],
         context="torchrun --nproc_per_node=2 on a CPU-only machine, no GPU",
         notes="nanochat-style compute_init: init_process_group('nccl') only in the device_type == 'cuda' "
               "branch, so under torchrun on a CPU machine no rank forms a process group and the first "
               "all_reduce fails on every rank. torchrun started 2 ranks, so this is not a missing launcher."),
    Case("gen_nccl_compound_backend", "nccl_without_cuda", "fail_nccl_on_cpu.py", None,
         expect=["Distributed package doesn't have NCCL built in", "cpu:gloo,cuda:nccl"],
         script_args=["--variant", "compound"],
         notes="init_process_group('cpu:gloo,cuda:nccl') on the CPU build fails the same way as plain nccl."),
    Case("gen_gloo_device_id_cuda", "nccl_without_cuda", "fail_nccl_on_cpu.py", None,
         expect=["does not match the current compilation's accelerator support"],
         script_args=["--variant", "device_id"],
         notes="init_process_group('gloo', device_id=torch.device('cuda', LOCAL_RANK)) on a CPU build: "
               "the backend was switched to gloo but the CUDA device_id was left in."),
    Case("gen_ddp_device_ids_cpu", "nccl_without_cuda", "fail_nccl_on_cpu.py", None,
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
    Case("gen_unused_parameters", "unused_parameters", "fail_unused_parameters.py", None,
         expect=["Expected to have finished reduction in the prior iteration"],
         notes="DDP without find_unused_parameters over a model with a layer forward never uses; both "
               "ranks fail on the second forward."),
    Case("gen_sigkill_rank1", "peer_died_first", "fail_sigkill.py", 1,
         expect=["SIGKILL", ECHO], script_args=["--bad-rank", "1"], launcher_args=["--monitor-interval=2"], attempts=3,
         notes="rank 1 gets SIGKILL (exitcode -9) with no message of its own, as from the OOM killer or "
               "a scheduler; the log alone cannot tell OOM from another kill, so oom_one_rank is not "
               "claimed. Rank 0's 'Connection closed by peer' is an echo."),
    Case("gen_mixed_exits_4ranks", "peer_died_first", "fail_mixed_exits.py", 1,
         expect=["ValueError: bad batch", "(SIGABRT)", "exitcode  : 3 ", ECHO], nproc=4,
         script_args=["--plan", "1:raise:0,3:exit:0.3,2:abort:0.6"], launcher_args=["--monitor-interval=2"],
         attempts=3,
         notes="rank 1 raises ValueError; 0.3 s later rank 3 calls sys.exit(3), 0.6 s later rank 2 aborts "
               "(SIGABRT); rank 0 echoes gloo's 'Connection closed by peer'. All fail within one torchrun "
               "check, so its summary lists ranks 1, 2 and 3 at the same second: only rank 1's traceback "
               "says who went first (a signal is not earlier than an exception)."),
    Case("gen_mixed_exits_filtered", "peer_died_first", "fail_mixed_exits.py", None,
         expect=["[default0]:", "(SIGABRT)", "exitcode  : 3 ", ECHO], nproc=4,
         script_args=["--plan", "1:raise:0,3:exit:0.3,2:abort:0.6"],
         launcher_args=["--tee", "3", "--local-ranks-filter", "0", "--monitor-interval=2"], attempts=3,
         notes="gen_mixed_exits_4ranks with only rank 0's output on the console: rank 1's ValueError is not "
               "in the log. torchrun's summary lists ranks 1 (exitcode 1), 2 (SIGABRT) and 3 (exitcode 3) "
               "at the same second, and calls the lowest of them root cause: the log does not show which "
               "rank failed first."),
    Case("gen_exit_code_rank2_prefix", "peer_died_first", "fail_mixed_exits.py", 2,
         expect=["[2]:rank 2: giving up", "exitcode  : 3 ", ECHO, "rank      : 0 (local_rank: 0)\n  exitcode  : 1 "],
         nproc=4, script_args=["--plan", "2:exit:0"], launcher_args=["--tee", "3", "--monitor-interval=3"],
         env={"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": "[${rank}]:"}, attempts=3,
         notes="rank 2 calls sys.exit(3) without a traceback; lines carry the global-rank prefix "
               "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[${rank}]:' (before torch's own [rankN]:). The other "
               "ranks only echo its death (gloo 'Connection closed/reset by peer') and exit 1 within the same "
               "3 s torchrun check, which then calls the lowest of them (rank 0, an echo) root cause; only "
               "rank 2's exitcode 3 among the echoes' 1s names it."),
    Case("gen_segv_rank3_faulthandler", "peer_died_first", "fail_mixed_exits.py", 3,
         expect=["Fatal Python error: Segmentation fault", "(SIGSEGV)", ECHO], nproc=4,
         script_args=["--plan", "3:segv:0"], launcher_args=["--monitor-interval=1"],
         env={"PYTHONFAULTHANDLER": "1"}, attempts=3,
         notes="rank 3 dies of SIGSEGV; faulthandler's 'Fatal Python error' block carries no rank prefix "
               "(it writes to the file descriptor, past torch's excepthook); ranks 0-2 echo it. Only "
               "torchrun's summary (rank 3, exitcode -11) ties the crash to a rank."),
    Case("gen_segv_node1_tee", "peer_died_first", "fail_mixed_exits.py", 3,
         expect=["[default1]:Fatal Python error: Segmentation fault", "rank      : 3 (local_rank: 1)"],
         script_args=["--plan", "3:segv:0"], launcher_args=["--tee", "3", "--monitor-interval=1"],
         env={"PYTHONFAULTHANDLER": "1"}, cmd=_torchrun_node1_of_two, attempts=3,
         notes="node 1 of a 2-node job (2 ranks per node): global rank 3 (local rank 1 there) dies of "
               "SIGSEGV. faulthandler's block carries only torchrun's [default1]: prefix, a LOCAL rank; "
               "torchrun's summary on node 1 says 'rank : 3 (local_rank: 1)'."),
    Case("gen_segv_two_nodes_logdir", "peer_died_first", "fail_mixed_exits.py", 3,
         expect=["rank      : 3 (local_rank: 1)", "(SIGSEGV)"], script_args=["--plan", "3:segv:0"],
         launcher_args=["--monitor-interval=1"], env={"PYTHONFAULTHANDLER": "1"}, cmd=_two_nodes_c10d_logdir,
         per_rank_dir=True, attempts=3,
         notes="2 nodes x 2 ranks, each agent with its own --log-dir: global rank 3 (local rank 1 of the agent "
               "that got ranks 2-3) dies of SIGSEGV. Its stderr.log holds only faulthandler's block, no rank "
               "prefix, under folder 1 (a LOCAL rank); the folder beside it (local 0) holds rank 2's own "
               "[rank2]: traceback, which places that node at ranks 2-3. The other node's folders are 0 and "
               "1 too."),
    Case("gen_segv_srun_torchrun", "peer_died_first", "fail_mixed_exits.py", 3,
         expect=["1: Fatal Python error: Segmentation fault", "rank      : 3 (local_rank: 1)"],
         script_args=["--plan", "3:segv:0"], launcher_args=["--monitor-interval=1"], cmd=_srun_torchrun,
         env={"PYTHONFAULTHANDLER": "1", "OMP_NUM_THREADS": "1"}, attempts=3,
         notes="srun -n2 --label: each task is a torchrun agent of 2 workers (a node of a 2-node job). Global "
               "rank 3 dies of SIGSEGV; faulthandler's block carries only srun's label of its task (a node "
               "id, not a rank); the ranks' own tracebacks carry [rankN]:, and that task's torchrun summary "
               "names rank 3 (local_rank: 1). Which task gets ranks 2-3 is the c10d join order."),
    Case("gen_segv_srun_torchrun_tee", "peer_died_first", "fail_mixed_exits.py", 3,
         expect=["1: [default1]:Fatal Python error: Segmentation fault", "rank      : 3 (local_rank: 1)"],
         script_args=["--plan", "3:segv:0"], launcher_args=["--monitor-interval=1", "--tee", "3"],
         cmd=_srun_torchrun, env={"PYTHONFAULTHANDLER": "1", "OMP_NUM_THREADS": "1"}, attempts=4,
         notes="as gen_segv_srun_torchrun with torchrun --tee 3: the crashed worker's lines read "
               "'1: [default1]:...': srun's task id (a node) then torchrun's LOCAL rank; the task's summary "
               "pairs local rank 1 with rank 3."),
    Case("gen_segv_srun_python_record", "peer_died_first", "fail_record_segv.py", 1,
         expect=["1: Fatal Python error: Segmentation fault", "errors/__init__.py", "task 1: Segmentation fault"],
         script_args=["--bad-rank", "1"], cmd=_srun_python, env={"PYTHONFAULTHANDLER": "1"}, attempts=3,
         notes="srun -n2 --label, one task per rank (no torchrun); main() carries @record, so rank 0's echo "
               "traceback has a torch/distributed/elastic frame although no agent ran. Rank 1's faulthandler "
               "block carries only srun's label, which is its rank here."),
    Case("gen_skip_rank3_timeouts", "rank_conditional_collective", "fail_mixed_exits.py", 3,
         expect=["Timed out waiting 10000ms", "rank      : 3 (local_rank: 3)", "(SIGTERM)"], nproc=4,
         script_args=["--plan", "3:skip:0"], also=["collective_timeout"], timeout=90,
         notes="4 ranks; the step-2 all_reduce runs on ranks 0-2 only while rank 3 stays busy. Ranks 0, 1 and "
               "2 time out after the 10 s group timeout; rank 3 reports nothing and torchrun stops it "
               "(SIGTERM). Its summary lists every rank, so the job is whole: the one rank that did not time "
               "out is the one the others waited for."),
    Case("gen_leave_rank3_echoes", "peer_died_first", "fail_mixed_exits.py", None,
         expect=["Connection closed by peer", "ChildFailedError", "rank 3 step 1"], nproc=4,
         script_args=["--plan", "3:leave:0"], launcher_args=["--monitor-interval=1"], attempts=3,
         also=["rank_conditional_collective"],
         notes="rank 3 leaves the loop one step early and ends cleanly (exit status 0, so torchrun's summary "
               "does not list it); ranks 0-2 lose their peer inside all_reduce and only echo it: what the log "
               "shows is a peer that went away. Every failure listed is an echo and no line states the job's "
               "size: the log does not show which rank went first (torchrun still calls an echo root cause)."),
    Case("gen_two_close_tee", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["[default2]:[rank2]: ValueError: bad batch", "[default1]:[rank1]: ValueError: bad batch", ECHO],
         nproc=4, script_args=["--plan", "2:raise:0,1:raise:1.5"], launcher_args=["--tee", "3", "--monitor-interval=3"],
         attempts=3,
         notes="two ranks fail alike close together: rank 2 raises ValueError, rank 1 the same 1.5 s later. A peer's "
               "'Connection closed by peer' echo comes between the two tracebacks: the job was already coming "
               "down when rank 1 failed, so rank 2 went first (not 'the same failure on every rank')."),
    Case("gen_two_close_srun_ts", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["[rank2]: ValueError: bad batch", "[rank1]: ValueError: bad batch"], nproc=4,
         script_args=["--plan", "2:raise:0,1:raise:0.4"], cmd=_srun_tasks_ts_files, timeout=90,
         notes="one Slurm task per rank, each task's output through moreutils `ts` into rank_%t.log, the files "
               "joined rank after rank: rank 1's traceback comes before rank 2's in the file, but `ts` says rank "
               "2 raised 0.4 s earlier. Time, not position, orders files joined one after the other."),
    Case("gen_clock_prefix_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["] [rank2]: ValueError: bad batch", ECHO], nproc=4, script_args=["--plan", "2:raise:0"],
         launcher_args=["--monitor-interval=1"], cmd=_piped(CLOCK_STAMP), attempts=3,
         notes="torchrun's output through a wrapper that puts the clock alone in brackets ([06:39:09]) in "
               "front of each line; rank 2 raises, the others echo."),
    Case("gen_ts_pipe_kill3", "peer_died_first", "fail_rank_shapes.py", 3,
         expect=["(SIGKILL)", "[default0]:"], nproc=4, script_args=["--plan", "3:kill:0"],
         launcher_args=["--tee", "3", "--monitor-interval=1"], cmd=_piped("ts"), attempts=3,
         notes="torchrun --tee 3 piped through moreutils `ts` (its default 'Nov 27 06:40:07' stamp); rank 3 is "
               "killed (SIGKILL, as by the OOM killer) without a word; only torchrun's summary names it."),
    Case("gen_spawn_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["ValueError: bad batch", "ProcessRaisedException"], nproc=4,
         script_args=["--spawn", "4", "--plan", "2:raise:0"], plain_python=True, attempts=3,
         notes="torch.multiprocessing.spawn starts 4 ranks (no torchrun, no summary): rank 2 raises, the "
               "parent re-raises it as ProcessRaisedException ('-- Process 2 terminated with the following "
               "error:')."),
    Case("gen_launch_legacy_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["torch.distributed.launch is deprecated", "ValueError: bad batch"], nproc=4,
         script_args=["--plan", "2:raise:0"], cmd=_legacy_launch, attempts=3,
         notes="the deprecated python -m torch.distributed.launch --use-env: its FutureWarning, then torchrun's "
               "output; rank 2 raises."),
    Case("gen_progress_midline_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["\rrank ", "[rank2]: ValueError: bad batch"], nproc=4,
         script_args=["--plan", "2:raise:0", "--progress"], launcher_args=["--monitor-interval=1"],
         cmd=_piped("cat", raw=True), attempts=3,
         notes="every rank redraws one progress line on the shared stderr as tqdm does (carriage returns, no "
               "newline), so each rank's traceback starts in the middle of another rank's progress line. Kept "
               "byte for byte."),
    Case("gen_crlf_tee_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["\r\n", "[default2]:[rank2]: ValueError: bad batch"], nproc=4, script_args=["--plan", "2:raise:0"],
         launcher_args=["--tee", "3", "--monitor-interval=1"], cmd=_piped("sed 's/$/\\r/'", raw=True), attempts=3,
         notes="torchrun --tee 3 output with Windows line ends (CRLF, as a log saved on Windows); kept byte for byte."),
    Case("gen_srun11_raise10", "peer_died_first", "fail_rank_shapes.py", 10,
         expect=["10: [rank10]: ValueError: bad batch", " 0: "], nproc=11, script_args=["--plan", "10:raise:0"],
         cmd=_srun_many_tasks, timeout=120,
         notes="srun -n11 --label (one task per rank): srun pads its labels to two places (' 0: ' .. '10: '); "
               "rank 10 raises, the others echo, srun reports the exits."),
    Case("gen_oom_alloc_rank1", "oom_one_rank", "fail_rank_shapes.py", 1,
         expect=["[rank1]: RuntimeError: [enforce fail at alloc_cpu.cpp", ECHO], nproc=4,
         script_args=["--plan", "1:oom:0"], launcher_args=["--monitor-interval=1"], also=["peer_died_first"],
         attempts=3,
         notes="rank 1 alone asks for more memory than the machine has (64 TiB): torch's DefaultCPUAllocator "
               "refuses; the others echo its death."),
    Case("gen_logging_handler_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["- trainer - ERROR - rank 2: training failed", "ValueError: bad batch"], nproc=4,
         script_args=["--plan", "2:raise:0", "--log-style", "logging"], launcher_args=["--monitor-interval=1"],
         attempts=3,
         notes="every rank logs through a Python logging handler ('%(asctime)s - %(name)s - %(levelname)s - ') "
               "and logs its own failure with logger.exception before exiting 1 (no [rankN]: prefix on the "
               "traceback): rank 2 raises, the others log the lost connection."),
    Case("gen_jsonl_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=['"rank": 2, "msg": "rank 2: training failed"', "ValueError: bad batch"], nproc=4,
         script_args=["--plan", "2:raise:0", "--log-style", "json"], launcher_args=["--monitor-interval=1"],
         attempts=3,
         notes="every rank logs one JSON object a line ({\"time\", \"level\", \"logger\", \"rank\", \"msg\", "
               "\"exc_info\"}, the traceback as one escaped string), as a log collector keeps them; torchrun's own "
               "lines stay plain. Rank 2 raises, the others log the lost connection."),
    Case("gen_chain_oom_rank1", "oom_one_rank", "fail_rank_shapes.py", 1,
         expect=["The above exception was the direct cause", "[enforce fail at alloc_cpu.cpp"], nproc=4,
         script_args=["--plan", "1:oomchain:0"], launcher_args=["--monitor-interval=1"], also=["peer_died_first"],
         attempts=3,
         notes="rank 1's allocation fails and the program re-raises it as RuntimeError('forward pass failed') "
               "from the allocator's error: the root error is the FIRST exception of the chain, the last line "
               "only wraps it."),
    Case("gen_during_oom_rank1", "oom_one_rank", "fail_rank_shapes.py", 1,
         expect=["During handling of the above exception", "[enforce fail at alloc_cpu.cpp"], nproc=4,
         script_args=["--plan", "1:oomduring:0"], launcher_args=["--monitor-interval=1"], also=["peer_died_first"],
         attempts=3,
         notes="as gen_chain_oom_rank1, but the new error is raised inside the except block without `from` "
               "('During handling of the above exception, another exception occurred')."),
    Case("gen_warnings_noise_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["UserWarning: batch 1499:", "[rank2]: ValueError: bad batch"], nproc=4,
         script_args=["--plan", "2:raise:0", "--warn", "1500"], launcher_args=["--monitor-interval=1"], attempts=3,
         notes="every rank first emits 1500 UserWarnings (two lines each, 12000 lines of noise); then rank 2 "
               "raises and the others echo."),
    Case("gen_dataloader_caught_raise1", "peer_died_first", "fail_rank_shapes.py", 1,
         expect=["Caught ValueError in DataLoader worker process 0", ECHO], nproc=4,
         script_args=["--plan", "1:dlraise:0"], launcher_args=["--monitor-interval=1"], attempts=3,
         notes="rank 1's DataLoader worker process cannot read a record and raises; torch re-raises it in rank 1 "
               "('Caught ValueError in DataLoader worker process 0' with the worker's traceback as text); the "
               "others echo."),
    Case("gen_tail_rank_files_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["==> logs/rank_2.log <==", "ValueError: bad batch"], nproc=4, script_args=["--plan", "2:raise:0"],
         cmd=_rank_files("tail -n +1 logs/rank_*.log"), timeout=90,
         notes="4 ranks started by hand (no launcher), each into logs/rank_<r>.log, shown with `tail -n +1 "
               "logs/rank_*.log` (\"==> logs/rank_1.log <==\" headers); rank 2 raises, the others echo."),
    Case("gen_grep_rank_files_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["logs/rank_2.log:", "ValueError: bad batch"], nproc=4, script_args=["--plan", "2:raise:0"],
         cmd=_rank_files("grep -r '' logs/"), timeout=90,
         notes="as gen_tail_rank_files_raise2, shown with `grep -r '' logs/` (each line behind its file's name, "
               "files in directory order)."),
    Case("gen_srun_out_files_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=["==> out/", "ValueError: bad batch", "srun: error:"], nproc=4, script_args=["--plan", "2:raise:0"],
         cmd=_srun_output_files, timeout=120,
         notes="srun -n4 -o out/%j_%t.out (one file per task as `#SBATCH --output=%j_%t.out`), one task per rank; "
               "srun's console (task exits, slurmstepd CANCELLED) then `tail -n +1 out/*.out`. Rank 2 raises."),
    Case("gen_srun_label_kill1", "peer_died_first", "fail_rank_shapes.py", 1,
         expect=["task 1: Killed"], nproc=4, script_args=["--plan", "1:kill:0"], cmd=_srun_many_tasks, timeout=120,
         notes="srun -n4 --label, one task per rank; rank 1 is killed (SIGKILL, as by the OOM killer) without a "
               "word: only srun's 'task 1: Killed' names it; the others echo the lost peer."),
    Case("gen_docker_json_raise2", "peer_died_first", "fail_rank_shapes.py", 2,
         expect=['"log": "[rank2]: ValueError: bad batch', ECHO], nproc=4, script_args=["--plan", "2:raise:0"],
         launcher_args=["--monitor-interval=1"], cmd=_piped(JSON_FILE_STAMP), attempts=3,
         notes="torchrun's combined output kept one JSON object a line as Docker's json-file driver keeps a "
               "container's ({\"log\": \"<line>\\n\", \"stream\": \"stdout\", \"time\": \"...Z\"}); rank 2 "
               "raises, the others echo."),
    Case("gen_tail_two_nodes_raise3", "peer_died_first", "fail_rank_shapes.py", 3,
         expect=["==> node1.log <==", "[rank3]: ValueError: bad batch"], nproc=2,
         script_args=["--plan", "3:raise:0"], launcher_args=["--monitor-interval=1"], cmd=_two_nodes_files_tail,
         timeout=120, attempts=3,
         notes="two torchrun agents (nodes 0 and 1, 2 workers each), each console in its own file, shown with "
               "`tail -n +1 node0.log node1.log`; global rank 3 (local rank 1 of node 1) raises, the other ranks "
               "echo; each agent's summary names local ranks of its own node."),
    Case("gen_logging_chain_oom_rank1", "oom_one_rank", "fail_rank_shapes.py", 1,
         expect=["- trainer - ERROR - rank 1: training failed", "The above exception was the direct cause",
                 "[enforce fail at alloc_cpu.cpp"], nproc=4,
         script_args=["--plan", "1:oomchain:0", "--log-style", "logging"], launcher_args=["--monitor-interval=1"],
         also=["peer_died_first"], attempts=3,
         notes="gen_chain_oom_rank1 through a logging handler: rank 1 logs the whole chain with "
               "logger.exception (the allocator's error first, the wrapping RuntimeError last), the others log "
               "the lost peer."),
    Case("gen_oom_rank0_cpu", "oom_one_rank", "fail_oom_rank0.py", 0,
         expect=["DefaultCPUAllocator: can't allocate memory"], also=["peer_died_first"],
         notes="each rank is capped at 3 GiB of address space (RLIMIT_AS, like a container limit); rank 0 "
               "alone gathers every rank's predictions (8 GiB) and its allocation fails; rank 1 then sees "
               "'Connection closed by peer' at the barrier."),
    Case("gen_python_no_launcher", "single_process_launch", "fail_port_in_use.py", None,
         expect=["environment variable RANK expected, but not set"], plain_python=True,
         context="python train.py (the script calls init_process_group with the default env://)",
         notes="a distributed script started with plain python: no RANK/WORLD_SIZE/MASTER_ADDR in the "
               "environment, so the env:// rendezvous fails at once."),
    Case("gen_single_process_silent", "single_process_launch", "fail_single_process.py", None,
         expect=["ddp=False rank=0 world_size=1"], plain_python=True,
         context="python train.py on a machine with 2 GPUs; adding GPUs did not change the speed",
         notes="the script falls back to one process when RANK is unset (nanoGPT style); nothing fails, "
               "exit status 0; only 'world_size=1' in the log shows it."),
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
    Case("gen_uneven_batches_4ranks", "dataloader_uneven", "fail_uneven_batches.py", None,
         expect=["rank 0: 2 batches", "Timed out waiting"], nproc=4,
         notes="5 shards over 4 ranks: rank 0 has 2 batches, ranks 1-3 have 1. Ranks 1-3 leave the loop and "
               "wait in the final all_reduce while rank 0 starts its second DDP step; every rank times out "
               "after 5 s (no size-mismatch abort this time), which makes it look like a plain hang."),
    Case("gen_compile_head_dim", "shape_config_error", "fail_compile_head_dim.py", None,
         expect=["Dynamo failed to run FX node with fake tensors", "is invalid for input of size"],
         timeout=120,
         notes="d_model=104 with head_dim=12 (104 is not a multiple of 12) under torch.compile; every "
               "rank fails the same way in dynamo tracing."),
    Case("gen_compile_no_cxx", "compile_toolchain", "fail_compile_toolchain.py", None,
         expect=["InvalidCxxCompiler"], env={"CXX": "/nonexistent/g++"}, timeout=120,
         notes="a correct model under torch.compile on a node whose CXX names a compiler that is not there: "
               "inductor cannot build CPU kernels; every rank fails the same way."),
    Case("gen_launcher_run_ambiguous", "launcher_args", "fail_launcher_flag.py", None,
         expect=["ambiguous option: --run could match --run-path, --run_path"], cmd=_torchrun_no_dashdash,
         script_args=["--device-type", "cpu", "--run", "test"],
         notes="the script's own --run flag, written after the script name without `--`, is still "
               "parsed by torchrun as an abbreviation of --run-path/--run_path; torchrun exits 2 before "
               "starting any worker."),
    Case("gen_launcher_dashdash_middle", "launcher_args", "fail_launcher_flag.py", None,
         expect=["unrecognized arguments: -- --run test"], cmd=_torchrun_no_dashdash,
         script_args=["--device-type", "cpu", "--", "--run", "test"],
         notes="`--` put between script flags (not right after the script name) is passed through to "
               "the script, whose argparse rejects it; every rank exits 2."),
    Case("gen_meta_device", "device_mismatch", "fail_meta_device.py", None,
         expect=["Tensor on device meta is not on the expected device cpu"],
         notes="model created under torch.device('meta') and never materialised, fed a CPU batch. A "
               "CPU-only build cannot show 'Expected all tensors to be on the same device' (that needs "
               "two real devices); this is its CPU-side equivalent."),
    Case("gen_detail_debug_segfault", "collective_timeout", "fail_ddp_generate_rank0.py", None,
         expect=["SIGSEGV"], env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
         also=["rank_conditional_collective"],
         context="set TORCH_DISTRIBUTED_DEBUG=DETAIL to find why generation after training hangs",
         notes="with TORCH_DISTRIBUTED_DEBUG=DETAIL every rank dies with SIGSEGV (exitcode -11) while "
               "constructing DDP on gloo, torch 2.13 CPU, before any step and with no Python traceback "
               "(see the faulthandler variant for where). The desync toolkit itself crashes here; no "
               "taxonomy id names that yet, so the cause is the one the user was debugging with it."),
    Case("gen_detail_debug_segfault_faulthandler", "collective_timeout", "fail_ddp_generate_rank0.py", None,
         expect=["Fatal Python error: Segmentation fault", "_ddp_init_helper"],
         env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "PYTHONFAULTHANDLER": "1"},
         also=["rank_conditional_collective"],
         context="set TORCH_DISTRIBUTED_DEBUG=DETAIL to find why generation after training hangs",
         notes="as gen_detail_debug_segfault with PYTHONFAULTHANDLER=1: the Python stack at the crash is "
               "DDP.__init__ -> _ddp_init_helper (distributed.py:1473, self.logger.set_construction_data_"
               "and_log), i.e. the C++ DDP logger that records the debug environment variables."),
    Case("gen_monitored_barrier", "collective_timeout", "fail_monitored_barrier.py", 0,
         expect=["failed to pass monitoredBarrier"],
         notes="rank 1 is busy (a sleep) and misses a monitored_barrier(timeout=3s); rank 0 names "
               "rank 1 but nothing says why it was late."),
    Case("gen_prework_late_rank", "rank_start_skew", "fail_rank0_prework.py", 0,
         expect=["Running tokenizer on train dataset", "Timed out waiting 5000ms for recv operation"],
         notes="rank 0 alone 'tokenises' (prints a map progress line, then sleeps 20 s) while rank 1 waits in "
               "dist.barrier() under init_process_group(timeout=5s); rank 1 times out, rank 0's last lines are "
               "its pre-work. First failing rank 0: the late rank (rank 1 only waited for it), as in "
               "gen_prework_three_ranks."),
    Case("gen_prework_three_ranks", "rank_start_skew", "fail_rank0_prework.py", 0,
         expect=["Running tokenizer on train dataset", "Timed out waiting 5000ms for"], nproc=3,
         notes="as gen_prework_late_rank on 3 ranks: ranks 1 and 2 time out in the barrier, rank 0 (still "
               "'tokenising') reports nothing, so its peers name it."),
    Case("gen_dataloader_fd_limit", "dataloader_fd_limit", "fail_dataloader_fd_limit.py", None,
         expect=["Too many open files. Communication with the workers is no longer possible"], cmd=_low_fd_limit,
         notes="each rank's DataLoader (4 workers, the default file_descriptor sharing strategy) hands over "
               "batches of 16 tensors and the loop keeps every batch, so each received tensor holds a "
               "descriptor; under ulimit -n 128 both ranks stop with torch's 'Too many open files' message."),
    Case("gen_dataloader_fd_ancdata", "dataloader_fd_limit", "fail_dataloader_fd_limit.py", None,
         expect=["RuntimeError: received 0 items of ancdata"], script_args=["--workers", "2"], cmd=_low_fd_limit,
         notes="as gen_dataloader_fd_limit with 2 workers per rank: the descriptor runs out while "
               "multiprocessing receives one (rebuild_storage_fd), and the error is 'received 0 items of "
               "ancdata'."),
    Case("gen_makedirs_race", "download_race", "fail_makedirs_race.py", 1,
         expect=["FileExistsError"], script_args=["--out", "/tmp/distdoctor-makedirs-race"],
         setup=_fresh_dir, attempts=3,
         notes="both ranks see that the cache directory does not exist, then both os.makedirs it "
               "without exist_ok; the slower one gets FileExistsError. Which rank loses is timing."),
    Case("gen_code_not_synced", "environment_mismatch", "fail_code_not_synced.py", None,
         expect=["DDP expects same model across all ranks"],
         script_args=["--config-dir", "/tmp/distdoctor-node-configs"], setup=_stale_node_config,
         context="two nodes, code and configs copied to each by hand; the second node's copy is older",
         notes="simulated on one host: rank r reads node<r>.json, and rank 1's copy has 2 layers instead of "
               "3; DDP's parameter check names the mismatch on both ranks."),
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
    # torch 2.13's own messages (evals/programs/fail_torch_messages.py, one --variant per message family)
    Case("gen_gloo_premul_sum", "gloo_missing_feature", "fail_torch_messages.py", None,
         expect=["Cannot use ReduceOp.PREMUL_SUM with Gloo"], script_args=["--variant", "premul_sum"],
         notes="all_reduce with ReduceOp.PREMUL_SUM (NCCL's pre-scaled sum) on gloo; every rank fails the same way."),
    Case("gen_store_host_died", "peer_died_first", "fail_torch_messages.py", None,
         expect=["Failed to recv, got 0 bytes"], script_args=["--variant", "store_host_died"], cmd=_two_plain_ranks,
         notes="two ranks started by hand (env://); rank 0 hosts the TCPStore and exits silently (os._exit(1)), "
               "rank 1's next store.get reads 0 bytes. Only the echo shows; the log does not say which rank died."),
    Case("gen_local_rank_no_launcher", "single_process_launch", "fail_torch_messages.py", 0,
         expect=["LOCAL_RANK is not in the environment"], script_args=["--variant", "local_rank_env"],
         plain_python=True, env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29571", "RANK": "0", "WORLD_SIZE": "1"},
         notes="plain python with RANK/WORLD_SIZE set by hand; dist.get_node_local_rank() finds no LOCAL_RANK."),
    Case("gen_mpi_backend_wheel", "mpi_launcher_env", "fail_torch_messages.py", None,
         expect=["Distributed package doesn't have MPI built in"], script_args=["--variant", "mpi_backend"],
         plain_python=True, env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29572", "RANK": "0", "WORLD_SIZE": "1"},
         notes="init_process_group('mpi') on the pip wheel, which is built without MPI."),
    Case("gen_fsdp_no_accelerator", "nccl_without_cuda", "fail_torch_messages.py", None,
         expect=["FSDP needs a non-CPU accelerator device"], script_args=["--variant", "fsdp_no_accelerator"],
         notes="FSDP(cpu_module) without device_id on a machine without GPUs; every rank fails in the constructor."),
    Case("gen_nproc_gpu_no_cuda", "nccl_without_cuda", "fail_torch_messages.py", None,
         expect=["Cuda is not available."], script_args=["--variant", "ok"], cmd=_torchrun_gpu_count,
         notes="torchrun --nproc_per_node=gpu on a machine where torch sees no CUDA; no rank is started."),
    Case("gen_launcher_nnodes_format", "launcher_args", "fail_torch_messages.py", None,
         expect=['is not in "MIN:MAX" format'], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1:2:3"],
         notes="torchrun rejects its own --nnodes value before starting any rank."),
    Case("gen_launcher_endpoint_no_port", "launcher_args", "fail_torch_messages.py", None,
         expect=["port is missing in endpoint"], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1", "--rdzv-endpoint=localhost"],
         notes="a --rdzv-endpoint without a port under the default static rendezvous; no rank is started."),
    Case("gen_launcher_rdzv_conf_bool", "launcher_args", "fail_torch_messages.py", None,
         expect=["does not represent a valid boolean value"], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:29611",
                        "--rdzv-conf=is_host=maybe"],
         notes="a --rdzv-conf boolean option with a value torchrun cannot read; no rank is started."),
    Case("gen_launcher_rdzv_conf_int", "launcher_args", "fail_torch_messages.py", None,
         expect=["does not represent a valid integer value"], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:29612",
                        "--rdzv-conf=join_timeout=10min"],
         notes="--rdzv-conf join_timeout written with a unit (torchrun wants seconds); no rank is started."),
    Case("gen_launcher_rdzv_timeout_negative", "launcher_args", "fail_torch_messages.py", None,
         expect=["timeout (", "must be positive"], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:29613",
                        "--rdzv-conf=join_timeout=-5"],
         notes="--rdzv-conf join_timeout=-5; the rendezvous handler rejects it; no rank is started."),
    Case("gen_launcher_rdzv_store_type", "launcher_args", "fail_torch_messages.py", None,
         expect=["Invalid store type given"], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:29641",
                        "--rdzv-conf=store_type=redis"],
         notes="--rdzv-conf store_type names a store the c10d rendezvous does not have; no rank is started."),
    Case("gen_launcher_rdzv_read_timeout", "launcher_args", "fail_torch_messages.py", None,
         expect=["The read timeout must be a positive integer"], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:29642",
                        "--rdzv-conf=read_timeout=0"],
         notes="--rdzv-conf read_timeout=0; the c10d rendezvous backend rejects it; no rank is started."),
    Case("gen_launcher_log_dir_file", "launcher_args", "fail_torch_messages.py", None,
         expect=["is a file"], script_args=["--variant", "ok"], launcher_args=["--log-dir=/etc/hostname"],
         notes="torchrun --log-dir names an existing file, not a folder; no rank is started."),
    Case("gen_launcher_redirects_value", "launcher_args", "fail_torch_messages.py", None,
         expect=["does not match: <"], script_args=["--variant", "ok"], launcher_args=["--redirects=0:3,1"],
         notes="torchrun --redirects with a value that is neither one stream number nor local_rank:stream pairs "
               "(the last item lacks its rank); no rank is started."),
    Case("gen_monitored_barrier_not_gloo", "backend_missing_collective", "fail_init_options.py", None,
         expect=["monitored_barrier is only implemented for GLOO backend"],
         script_args=["--variant", "monitored_barrier_not_gloo"],
         notes="dist.monitored_barrier() on a group whose backend is not gloo (torch's test backend 'fake' in the "
               "place of NCCL, which a CPU machine cannot start); every rank raises before any barrier."),
    Case("gen_gloo_device_id_int", "nccl_without_cuda", "fail_init_options.py", None,
         expect=["device_id is an int, but no accelerator support is found"],
         script_args=["--variant", "device_id_int"],
         notes="init_process_group('gloo', device_id=LOCAL_RANK), GPU code, on the CPU-only torch wheel; every rank "
               "fails in init_process_group."),
    Case("gen_launcher_rdzv_endpoint_host", "launcher_args", "fail_torch_messages.py", None,
         expect=["The hostname of the rendezvous endpoint"], script_args=["--variant", "ok"], cmd=_torchrun_static,
         launcher_args=["--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=bad_host!:29400"],
         notes="a --rdzv-endpoint host name torchrun cannot parse; no rank is started."),
    Case("gen_virtual_local_rank_gpus", "local_rank_device", "fail_torch_messages.py", None,
         expect=["exceeds available GPUs in CUDA_VISIBLE_DEVICES"], script_args=["--variant", "ok"],
         launcher_args=["--virtual-local-rank"], env={"CUDA_VISIBLE_DEVICES": "0"},
         notes="torchrun --virtual-local-rank with 2 processes per node and one GPU in CUDA_VISIBLE_DEVICES; "
               "the agent stops before starting rank 1."),
    Case("gen_uneven_join_skew", "dataloader_uneven", "fail_torch_messages.py", None,
         expect=["Detected uneven input skew"], script_args=["--variant", "uneven_join"], timeout=120,
         notes="DDP under Join, rank 0 with 1010 batches and rank 1 with 3: the job finishes and rank 1 warns "
               "of the skew; nothing fails."),
    Case("gen_gloo_allgather_sizes", "collective_shape_mismatch", "fail_torch_messages.py", 1,
         expect=["ProcessGroupGloo::allgather: invalid tensor size"], script_args=["--variant", "allgather_sizes"],
         notes="all_gather_into_tensor into a buffer of 4 per rank; rank 1 brings 8 elements and gloo stops it "
               "before sending; rank 0 then reads 'Connection closed by peer'."),
    Case("gen_gloo_reduce_scatter_sizes", "collective_shape_mismatch", "fail_torch_messages.py", 1,
         expect=["outputShape[0] * worldSize == inputShape[0]"], script_args=["--variant", "reduce_scatter_sizes"],
         notes="reduce_scatter_tensor whose output on rank 1 is 8 elements for an input of 4 per rank."),
    Case("gen_gloo_all_to_all_sizes", "collective_shape_mismatch", "fail_torch_messages.py", 0,
         expect=["in->size == out->size"], script_args=["--variant", "all_to_all_sizes"],
         notes="all_to_all_single with an input of 4 on rank 0 (8 on rank 1) into outputs of 8."),
    # store waits that run out (evals/programs/fail_store_wait.py): the key awaited says who was missing
    Case("gen_store_wait_late_rank", "rank_start_skew", "fail_store_wait.py", 1,
         expect=["wait timeout after 5000ms, keys: /default_pg/0//cpu//0/0"], script_args=["--variant", "rank_late"],
         notes="rank 0 sleeps 15 s before init_process_group(timeout=5 s); rank 1 times out waiting for rank 0's "
               "gloo address (store key .../0/0), so the first failure is rank 1's and the missing rank is 0."),
    Case("gen_store_wait_new_group", "rank_conditional_collective", "fail_store_wait.py", 0,
         expect=["keys: /default_pg/0//1//cpu//0/1"], script_args=["--variant", "new_group_partial"],
         notes="only rank 0 calls dist.new_group([0, 1]); it times out waiting for rank 1's address in group 1."),
    Case("gen_store_wait_own_key", "rank_conditional_collective", "fail_store_wait.py", 1,
         expect=["wait timeout after 5000ms, keys: /default_pg/0//ckpt_step"], script_args=["--variant", "key_never_set"],
         notes="rank 0 skips the store.set('ckpt_step') that rank 1's store.get waits for. A key the program sets "
               "itself does not say why nobody set it: the diagnosis gives candidates only."),
    Case("gen_store_wait_peer_failed", "peer_died_first", "fail_store_wait.py", 1,
         expect=["rank 1 failed before publishing its result", "keys: /default_pg/0//result_1"],
         script_args=["--variant", "peer_failed"], nproc=1, cmd=_two_c10d_nodes, timeout=90,
         notes="two torchrun agents (nodes) of one worker each; rank 1 raises before it sets result_1 and rank 0's "
               "store.get('result_1') times out: node 1's agent does not stop node 0's worker."),
    Case("gen_store_barrier_oversized", "store_barrier_world_size", "fail_store_wait.py", None,
         expect=["missing_ranks=[2]"], script_args=["--variant", "barrier_oversized", "--traced"],
         launcher_args=["--tee", "3"],  # whole lines: the two ranks' messages are long and fail together
         notes="both ranks enter torch.distributed.elastic.utils.store.barrier sized for 3 members; rank 0 names "
               "the missing rank 2, which the 2-rank job does not have. Both ranks fail alike: no first rank."),
    Case("gen_store_wait_world_oversized", "store_barrier_world_size", "fail_store_wait.py", None,
         expect=["keys: /default_pg/0//cpu//0/2"], script_args=["--variant", "world_oversized"],
         launcher_args=["--tee", "3"],
         notes="both ranks pass init_process_group world_size=3 in a 2-rank job and wait for rank 2's gloo address; "
               "the log alone cannot tell this from a rank 2 on another node that is late (rank_start_skew leads, "
               "store_barrier_world_size is a candidate); the hang doctor reads the argument from the live ranks."),
    # a DataLoader worker that dies (evals/programs/fail_dataloader_worker_dies.py)
    Case("gen_dataloader_worker_exits", "peer_died_first", "fail_dataloader_worker_dies.py", 1,
         expect=["exited unexpectedly with exit code 1"], script_args=["--how", "exit"], attempts=3,
         notes="a DataLoader worker of rank 1 exits (os._exit(1)); rank 1's loader raises and rank 0 reads "
               "'Connection closed by peer'. No distributed cause: rerun rank 1's loop with num_workers=0."),
    Case("gen_dataloader_worker_killed", "oom_one_rank", "fail_dataloader_worker_dies.py", 1,
         expect=["is killed by signal: Killed."], script_args=["--how", "kill"], attempts=3,
         notes="a DataLoader worker of rank 1 gets SIGKILL, as from the kernel's OOM killer."),
    Case("gen_dataloader_worker_segv", "peer_died_first", "fail_dataloader_worker_dies.py", 1,
         expect=["Unexpected segmentation fault encountered in worker."], script_args=["--how", "segv"], attempts=3,
         notes="a DataLoader worker of rank 1 segfaults; torch's handler ends its message with a NUL byte before "
               "the next line (kept in the log: a real log is read, not refused as binary)."),
]


@dataclass
class FieldCase:
    """A log quoted in a field report (../shared/field-reports): lines `first`..`last`, copied verbatim."""

    name: str
    report: str
    first: str  # a substring of the first line to copy
    last: str  # a substring of the last line to copy (searched from the first line on)
    cause: str
    first_failure_rank: int | None
    also: list[str] = field(default_factory=list)
    context: str | None = None
    notes: str | None = None


FIELD_REPORTS = ROOT.parent / "shared" / "field-reports"

FIELD_CASES: list[FieldCase] = [
    FieldCase("field_olmo_connection_closed", "olmo-core-multinode-errors.md",
              "g3053:52835:53467 [3] NCCL INFO [Service thread] Connection closed by localRank 0",
              "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
              "[10.64.77.53]:34971",
              "peer_died_first", 0, also=["slurm_launch"],
              context="OLMo-core launched with srun + python on a Slurm cluster; three ranks fail at a barrier",
              notes="ranks 1, 2 and 3 (g3053:1..3) all report gloo 'Connection closed by peer' in dist.barrier; "
                    "the NCCL line says the connection to localRank 0 closed, so rank 0 went first and its own "
                    "error is not in the quoted log. srun ran without --kill-on-bad-exit."),
    FieldCase("field_olmo_dynamo_view", "olmo-core-multinode-errors.md",
              "2025-06-16 16:44:37.316\tg3076:0", "q = q.view(B, T, -1, self.head_dim)",
              "shape_config_error", 0,
              context="wrong hidden dimension set in the TransformerConfig",
              notes="hidden size 832 is not a multiple of head_dim 75; dynamo reports it while tracing."),
    FieldCase("field_olmo_nccl_channels", "olmo-core-multinode-errors.md",
              "g3094:44814:45294 [1] NCCL INFO Channel 00/0", "g3094:44813:45295 [0] NCCL INFO Channel 03/0",
              "single_process_launch", None,
              context="training speed did not change when adding GPUs; all logs from GPU 0",
              notes="the user's evidence: wandb showed near-zero memory/power on all but GPU 0 and checkpoints "
                    "were only __0_*.distcp. The quoted NCCL lines themselves show one host pairing ranks "
                    "0 and 1, so the log alone is weak evidence; the context carries the diagnosis."),
    FieldCase("field_nanogpt_invalid_device_ordinal", "nanogpt-ddp-training-log.md",
              "ddp_world_size 8", "============================================================",
              "local_rank_device", 4,
              context="torchrun --nproc_per_node=8 on a node where the job was given 4 GPUs",
              notes="CUDA_VISIBLE_DEVICES was 0,1,2,3: ranks 4-7 have no device; torchrun names rank 4 as "
                    "root cause. Some lines of the quoted log are merged with trailing spaces as pasted."),
    FieldCase("field_nanogpt_heartbeat_timeout", "nanogpt-ddp-training-log.md",
              "[rank0]:[E ProcessGroupNCCL.cpp:1316]", "failed (exitcode: -6) local_rank: 0",
              "rank_conditional_collective", 0, also=["collective_timeout"],
              context="generation runs on rank 0 only after training",
              notes="the DDP model's forward is called for generation on the master process only; the "
                    "user fixed it by running the generation forward on every rank."),
    FieldCase("field_nanogpt_expected_all_tensors", "nanogpt-ddp-training-log.md",
              'File "/GPUFS/nsccgz_qylin_1/zt/gpt-dev/persona_gpt.py", line 292, in generate_tokens',
              "RuntimeError: Expected all tensors to be on the same device",
              "device_mismatch", None,
              context="token generation after DDP training",
              notes="the prompt idx was created on the CPU while the model is on cuda:0; fixed with "
                    "torch.zeros(..., device=device)."),
    FieldCase("field_nanogpt_dynamo_py312", "nanogpt-ddp-training-log.md",
              "Traceback (most recent call last):", "RuntimeError: Dynamo is not supported on Python 3.12+",
              "compile_toolchain", None,
              context="torch.compile(model) added to a nanoGPT-style script; torch 2.3 on Python 3.12"),
    FieldCase("field_nanogpt_gcc_c99", "nanogpt-ddp-training-log.md",
              "/tmp/tmpd5t0oroc/main.c: In function", "/tmp/tmp0td94o5b/main.c:354:3: error",
              "compile_toolchain", None,
              context="torch.compile on a cluster whose system gcc is 4.8.5",
              notes="Triton's generated C helper fails to build with the old gcc; fixed by a newer gcc."),
]


def extract_field(case: FieldCase) -> str:
    """The report's lines from the first line containing case.first to the next containing case.last."""
    lines = (FIELD_REPORTS / case.report).read_text(encoding="utf-8").splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if case.first in line), None)
    if start is None:
        raise ValueError(f"{case.name}: {case.report} has no line containing {case.first!r}")
    end = next((i for i in range(start, len(lines)) if case.last in lines[i]), None)
    if end is None:
        raise ValueError(f"{case.name}: {case.report} has no line containing {case.last!r} after line {start + 1}")
    return "".join(lines[start:end + 1])


def produce_field(case: FieldCase) -> tuple[bool, str]:
    """Write one field_* log (verbatim excerpt) and its meta."""
    try:
        text = extract_field(case)
    except (OSError, ValueError) as exc:
        return False, str(exc)
    meta: dict = {"source": f"field report {case.report}", "expected_cause": case.cause,
                  "first_failure_rank": case.first_failure_rank}
    if case.also:
        meta["also"] = list(case.also)
    for key in ("context", "notes"):
        if getattr(case, key):
            meta[key] = getattr(case, key)
    _write_atomic(LOGS / f"{case.name}.log", text)
    _write_atomic(LOGS / f"{case.name}.meta.yaml", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100))
    return True, f"{case.name}: {len(text.splitlines())} lines from {case.report}"


README_HEAD = """# Real log corpus

Logs that diagnosis, the knowledge base and the evals are tested on. Every `<name>.log` is real text:
produced here by torch 2.13 (CPU build, gloo), quoted from a public issue (URL in its meta), or copied
verbatim from a field report in `../shared/field-reports/`. Each has a sidecar `<name>.meta.yaml`:
`source`, `expected_cause` (the ROOT cause, a taxonomy id), `first_failure_rank` (global rank or null),
optional `also`, `context` (what the user says), `notes`, `program` (the broken program it came from).
`<name>.d/attempt_0/<rank>/{stdout,stderr}.log` is the per-rank `torchrun --log-dir` layout of the same run.

- `gen_*`: re-created by `python tests/data/make_logs.py [NAME...]` (`--list` shows the cases) from the
  broken programs in `evals/programs/fail_*.py`; a run that does not show its failure is not written.
  Timing decides some details (which echo a survivor prints, which rank torchrun calls root cause in
  a tie), so a re-created log can differ in those lines; the cause does not.
- `field_*`: `python tests/data/make_logs.py field_<name>` copies the lines again from the report.
- `tests/test_log_corpus.py` checks every meta (fields, taxonomy ids, source, log present).
- This table is written by `python tests/data/make_logs.py --readme`.

| name | expected cause | first rank | how produced |
|---|---|---|---|
"""


def write_readme() -> Path:
    """Write tests/data/logs/README.md: the header above and one row per meta found in the folder."""
    rows = []
    for meta_path in sorted(LOGS.glob("*.meta.yaml")):
        meta = yaml.safe_load(meta_path.read_text(encoding="utf-8")) or {}
        name = meta_path.name[: -len(".meta.yaml")]
        source = str(meta.get("source", "")).removeprefix("produced here: ")
        if (LOGS / f"{name}.d").is_dir():
            name += " (+ .d/)"
        rank = meta.get("first_failure_rank")
        cells = [name, str(meta.get("expected_cause", "?")), "-" if rank is None else str(rank), source]
        rows.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    path = LOGS / "README.md"
    _write_atomic(path, README_HEAD + "\n".join(rows) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="cases to re-create (default: all)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--readme", action="store_true",
                        help="only rewrite tests/data/logs/README.md from the metas there")
    args = parser.parse_args(argv)
    if args.readme:
        print(f"wrote {write_readme()}", file=sys.stderr)
        return 0
    by_name: dict[str, Case | FieldCase] = {c.name: c for c in [*CASES, *FIELD_CASES]}
    if args.list:
        for c in CASES:
            print(f"{c.name:34} {c.cause:28} {c.program}")
        for f in FIELD_CASES:
            print(f"{f.name:34} {f.cause:28} field report {f.report}")
        return 0
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        print(f"make_logs: unknown case(s): {', '.join(unknown)} (see --list)", file=sys.stderr)
        return 2
    chosen = [by_name[n] for n in args.names] if args.names else [*FIELD_CASES, *CASES]
    LOGS.mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, case in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {case.name} ...", file=sys.stderr, flush=True)
        ok, message = produce_field(case) if isinstance(case, FieldCase) else produce(case)
        failed += not ok
        print(("  ok " if ok else "  FAILED ") + message, file=sys.stderr, flush=True)
    write_readme()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
