"""Start a program that hangs under torchrun (gloo, CPU) and wait until it is stuck: for tests, evals and
the benchmark. The job runs in its own session; `kill()` ends the agent and every rank (and their children)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from distdoctor.hang.frames import GROUP_OPS
from distdoctor.hang.live import CollectError, collect  # noqa: F401 - collect is re-exported for callers
from distdoctor.hang.model import INIT, UNKNOWN, WAITING, HostSnapshot
from distdoctor.procs import descendants, kill_tree
from distdoctor.runner import torchrun_cmd


@dataclass
class Job:
    proc: subprocess.Popen
    log: Path
    nproc: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> list[int]:
        """Kill the agent, its process group and all descendants; returns pids still alive after (none)."""
        pids = [self.pid, *descendants(self.pid)]
        sessions = {_session(p) for p in pids} - {None, _session(os.getpid())}
        kill_tree(self.pid)
        orphans = [p for p in _pids() if _session(p) in sessions]  # a rank's children reparented away
        for p in orphans:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        pids += orphans
        self.proc.wait(timeout=10)
        if self.proc.stdin:
            self.proc.stdin.close()
        deadline = time.monotonic() + 5
        alive = pids
        while alive and time.monotonic() < deadline:
            alive = [p for p in pids if _alive(p)]
            time.sleep(0.05)
        return alive


def _pids() -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]


def _session(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[4])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def start(program: str | Path, nproc: int, env: dict[str, str] | None = None, port: int | None = None,
          log_dir: Path | None = None, stdin_open: bool = False) -> Job:
    """torchrun --standalone (or on a fixed port) with OMP_NUM_THREADS=1, output to a log file. stdin_open:
    the ranks' stdin is a pipe nobody writes to (a terminal nobody types in) rather than /dev/null. The ranks get
    DISTDOCTOR_JOB_DIR, the log's folder, for files of their own (gone with the caller's temporary folder)."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="hangjob_"))
    log = log_dir / f"{Path(program).stem}.log"
    launcher = [f"--master_port={port}"] if port else []
    cmd = torchrun_cmd(program, nproc, launcher_args=launcher)
    if port:
        cmd.remove("--standalone")
    return spawn(cmd, log, {"DISTDOCTOR_JOB_DIR": str(log_dir), **(env or {})}, nproc, stdin_open=stdin_open)


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None, nproc: int = 0,
          cwd: str | Path | None = None, stdin_open: bool = False) -> Job:
    """Start any launch command in its own session, OMP_NUM_THREADS=1, output to log (stdin: see start)."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                stdin=subprocess.PIPE if stdin_open else subprocess.DEVNULL,
                                start_new_session=True, cwd=cwd)
    return Job(proc, log, nproc)


def _signature(snap: HostSnapshot) -> tuple:
    return tuple((r.rank, r.state, r.op, r.file, r.line) for r in snap.ranks)


INIT_POLLS = 4  # a start-up that has not moved for this many polls (seconds apart) is stuck
STABLE_S = 2.0  # a signature unchanged for this long is a hang, not a rank waiting out a peer's short pause


def wait_stuck(job: Job | Callable[[], HostSnapshot], timeout: float = 60.0, fr_ranks: int = 0,
               fr_prefix: str | None = None, in_init: bool = False) -> HostSnapshot:
    """Poll the job's ranks (a Job, or a function that collects them) until some wait for others (in a
    collective; a rank in new_group waits too) and nothing moved for STABLE_S, so a rank waiting out a peer's
    one-second load is no hang (and, with fr_ranks, that many Flight Recorder traces are written). in_init: a job
    that hangs in its start-up; every rank in init_process_group for INIT_POLLS polls in a row is stuck. Raises
    TimeoutError (with the log's tail for a Job) otherwise."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    in_init_polls = 0
    snapshot = (lambda: collect(job.pid, timeout=10)) if isinstance(job, Job) else job
    while time.monotonic() < deadline:
        if isinstance(job, Job) and job.proc.poll() is not None:
            raise RuntimeError(f"the job ended (exit {job.proc.returncode}) instead of hanging:\n{job.output()[-2000:]}")
        try:
            snap = snapshot()
        except CollectError:
            time.sleep(0.5)
            continue
        ready = (any(r.state in WAITING for r in snap.ranks) and  # a rank in new_group waits like in a collective
                 all(r.state not in (INIT, UNKNOWN) or r.op in GROUP_OPS for r in snap.ranks))
        if in_init:
            in_init_polls = in_init_polls + 1 if snap.ranks and all(r.state == INIT for r in snap.ranks) else 0
            ready = in_init_polls >= INIT_POLLS
        fr_ok = not fr_ranks or len([p for p in Path(fr_prefix).parent.glob(Path(fr_prefix).name + "*")
                                     if p.name[len(Path(fr_prefix).name):].isdigit()]) >= fr_ranks
        sig = _signature(snap) if ready else None
        if sig is None or sig != last:
            last, since = sig, time.monotonic()
        elif fr_ok and (in_init or time.monotonic() - since >= STABLE_S):
            return snap
        time.sleep(0.5)
    tail = job.output()[-2000:] if isinstance(job, Job) else ""
    raise TimeoutError(f"the job did not get stuck in {timeout:g}s:\n{tail}")
