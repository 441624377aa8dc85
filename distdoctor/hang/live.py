"""Collect the snapshot of this host: find the rank processes (under a torchrun agent, an srun step, or all),
dump each with `py-spy dump --json` in parallel with a bounded time, and read Flight Recorder traces the
ranks wrote. Nothing is signalled: py-spy reads the processes from outside (pausing each for a moment)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from distdoctor.hang import flight_recorder as fr
from distdoctor.hang.frames import fill, main_thread, other_threads, pyspy_frames
from distdoctor.hang.init_wait import init_args
from distdoctor.hang.model import DATA, EXITED, INIT, UNKNOWN, WAITING, ZOMBIE, HostSnapshot, RankSnapshot
from distdoctor import stacks
from distdoctor.procs import blocked_call, children, reading_input, reading_pipe, stat_fields, waiting_futex, waiting_lock
from distdoctor.stacks import RankProcess, find_rank_processes
from distdoctor.tracer import FR_DEFAULT_PREFIX

PTRACE_HINT = ("py-spy needs ptrace rights over the ranks: run as the same user with "
               "kernel.yama.ptrace_scope=0 (`sudo sysctl kernel.yama.ptrace_scope=0`), or as root (`sudo`); in a "
               "container add --cap-add SYS_PTRACE")
INSTALL_HINT = f"py-spy is not installed: `pip install py-spy` (distdoctor[dev] has it); {PTRACE_HINT}"


class CollectError(Exception):
    """Input error: the message is one line saying what and where."""


def find_py_spy(given: str | None = None) -> str:
    """py-spy: the one given (a path or a name on PATH), else PATH, else beside this Python."""
    if given:
        found = shutil.which(given)
        if not found:
            raise CollectError(f"py-spy not found at {given!r}: {INSTALL_HINT}")
        return found
    found = stacks.find_py_spy()
    if not found:
        raise CollectError(INSTALL_HINT)
    return found


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.lstrip("-").isdigit() else None


def dump_one(py_spy: str, pid: int, timeout: float, nonblocking: bool = False, local_vars: bool = False
             ) -> tuple[list[dict] | None, str | None]:
    """py-spy's JSON threads of one process, or (None, one-line reason). py-spy pauses the process for the
    moment it reads the stack; nonblocking=True does not pause it (the stack may then be inconsistent);
    local_vars=True adds each frame's local variables (their repr)."""
    try:
        spy = subprocess.Popen([py_spy, "dump", "--json", "--pid", str(pid),
                                *(["--nonblocking"] if nonblocking else []), *(["--locals"] if local_vars else [])],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    except OSError as exc:
        return None, f"py-spy could not run: {exc}"
    try:
        out, err = spy.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(spy.pid, signal.SIGKILL)  # py-spy and anything it started; the rank is not touched
        spy.communicate()
        return None, f"py-spy dump did not answer in {timeout:g}s (killed); rank left as it was"
    res = subprocess.CompletedProcess(spy.args, spy.returncode, out, err)
    if res.returncode == 0:
        try:
            return json.loads(res.stdout), None
        except json.JSONDecodeError:
            return None, "py-spy printed no JSON: " + res.stdout.strip().splitlines()[0][:200] if res.stdout else ""
    text = " ".join((res.stderr or res.stdout).split())[:300]
    if any(w in text for w in ("Permission denied", "Operation not permitted", "EPERM")):
        return None, f"py-spy was refused ({text}); {PTRACE_HINT}"
    return None, f"py-spy failed: {text}"


def _snapshot(proc: RankProcess, host: str, py_spy: str, timeout: float, nonblocking: bool) -> RankSnapshot:
    env = proc.env or {}
    snap = RankSnapshot(_int(proc.rank), proc.pid, host, _int(proc.local_rank), _int(proc.world_size))
    if proc.zombie:
        snap.state, snap.error = ZOMBIE, "exited, not yet reaped by its parent (zombie)"
        return snap
    # what the main thread is blocked in, read before py-spy stops the process (a stop interrupts the call); what
    # it means (the fds it names, the lock's holder) is read after the dump, for the ranks whose answer is kept
    call = blocked_call(proc.pid)
    threads, error = dump_one(py_spy, proc.pid, timeout, nonblocking)
    if threads is None:
        gone = not Path(f"/proc/{proc.pid}").exists()
        snap.state = EXITED if gone else UNKNOWN
        snap.error = "exited during the dump" if gone else error
        return snap
    thread = main_thread(threads, proc.pid)
    if thread is None:
        snap.error = "py-spy returned no thread"
        return snap
    fill(snap, pyspy_frames(thread))
    if snap.state == DATA:
        snap.worker = stuck_worker(proc.pid, py_spy, timeout, nonblocking)
    elif snap.state == INIT:
        snap.init = _init_args(proc.pid, py_spy, timeout, nonblocking)
    if snap.state not in WAITING:
        snap.reads_input, snap.waits_lock = reading_input(proc.pid, call), waiting_lock(proc.pid, call)
        snap.waits_futex = waiting_futex(proc.pid, call)
        snap.reads_pipe = None if snap.reads_input else reading_pipe(proc.pid, call)
        snap.threads = other_threads(threads, thread)
    if env.get("SLURM_PROCID") and snap.rank is None:
        snap.rank = _int(env["SLURM_PROCID"])
    return snap


def _init_args(pid: int, py_spy: str, timeout: float, nonblocking: bool) -> dict | None:
    """A rank waits in init_process_group: the world_size, rank and init_method it passed (a second dump, with
    locals; only those three values are kept)."""
    threads, _ = dump_one(py_spy, pid, timeout, nonblocking, local_vars=True)
    thread = main_thread(threads or [], pid)
    return init_args(thread.get("frames") or []) if thread else None


MAX_WORKERS = 8  # DataLoader workers of one rank dumped when the rank waits for a batch


def stuck_worker(pid: int, py_spy: str, timeout: float, nonblocking: bool) -> dict | None:
    """A rank waits for its next batch: the first of its DataLoader workers whose main thread is in the user's
    own code (the Dataset's __getitem__, a collate_fn), as {pid, file, line, function}; None when every worker
    waits for work inside torch (idle) or none could be read."""
    for child in children(pid)[:MAX_WORKERS]:
        threads, _ = dump_one(py_spy, child, timeout, nonblocking)
        thread = main_thread(threads or [], child)
        if thread is None:
            continue
        probe = fill(RankSnapshot(None, child, ""), pyspy_frames(thread))
        if probe.file:  # an idle worker waits for indices inside torch: no frame of the user's
            return {"pid": child, "file": probe.file, "line": probe.line, "function": probe.function}
    return None


def expected_ranks(procs: list[RankProcess]) -> list[int]:
    """The global ranks the launcher of these processes started on this host (RANK - LOCAL_RANK +
    range(LOCAL_WORLD_SIZE)): a rank among them with no process has exited."""
    out: set[int] = set()
    for p in procs:
        env = p.env or {}
        rank, local, lws = _int(p.rank), _int(p.local_rank), _int(env.get("LOCAL_WORLD_SIZE"))
        if rank is not None and local is not None and lws:
            out.update(range(rank - local, rank - local + lws))
    return sorted(out)


def _job_key(p: RankProcess) -> tuple:
    """What tells two jobs apart on one host: Slurm job, torchrun run id, rendezvous address."""
    env = p.env or {}
    return tuple(env.get(k) for k in ("SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"))


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def _started(pid: int) -> float:
    """When a process started (epoch seconds), 0 when unknown."""
    try:
        ticks = int(stat_fields(pid)[19])
        return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def flight_recorder_files(procs: list[RankProcess]) -> dict[str, Path]:
    """{rank: trace file} for ranks whose `$TORCH_FR_DUMP_TEMP_FILE<rank>` was written by this run."""
    out = {}
    for p in procs:
        if p.rank is None:
            continue
        path = Path(f"{(p.env or {}).get('TORCH_FR_DUMP_TEMP_FILE') or FR_DEFAULT_PREFIX}{p.rank}")
        try:
            fresh = path.stat().st_mtime >= _started(p.pid) - 1
        except OSError:
            continue
        if fresh:
            out[p.rank] = path
    return out


def collect(root_pid: int | None = None, py_spy: str | None = None, timeout: float = 10.0,
            host: str | None = None, slurm_job: str | None = None, nonblocking: bool = False) -> HostSnapshot:
    """The snapshot of this host's ranks (under root_pid, or of Slurm job slurm_job, when given).
    Raises CollectError on input errors."""
    start = time.monotonic()
    host = host or socket.gethostname()
    try:
        procs = find_rank_processes(root_pid)
    except LookupError as exc:
        raise CollectError(f"{exc} (give the pid of a torchrun agent, an srun step or a rank)") from None
    if slurm_job:
        procs = [p for p in procs if (p.env or {}).get("SLURM_JOB_ID") == str(slurm_job)]
    if not procs:
        where = f"pid {root_pid} is no rank process and has none below it" if root_pid else \
            f"no rank process of Slurm job {slurm_job} on {host}" if slurm_job else "no rank process on this host"
        raise CollectError(f"{where} (looked for python processes with RANK in their environment or a "
                           "torchrun parent)")
    jobs = {_job_key(p) for p in procs}
    if root_pid is None and len(jobs) > 1:
        parents = sorted({p.ppid for p in procs})
        raise CollectError(f"ranks of {len(jobs)} jobs on {host} (parents {', '.join(map(str, parents[:8]))}): "
                           "choose one with --pid AGENT_PID")
    spy = find_py_spy(py_spy)
    with ThreadPoolExecutor(max_workers=min(64, len(procs))) as pool:
        ranks = list(pool.map(lambda p: _snapshot(p, host, spy, timeout, nonblocking), procs))
    one_rank = root_pid is not None and root_pid in {p.pid for p in procs}  # a rank, not its launcher
    snap = HostSnapshot(host, ranks, [] if one_rank else expected_ranks(procs))
    snap.errors = [f"rank {r.rank} pid {r.pid}: {r.error}" for r in ranks if r.error]
    for rank, path in flight_recorder_files(procs).items():
        try:
            snap.flight_recorder[rank] = fr.compact(fr.read_trace(path))
        except fr.TraceError as exc:
            snap.errors.append(str(exc))
    snap.seconds = time.monotonic() - start
    return snap
