"""Run a program for real under torchrun (gloo on CPU by default), with a timeout that kills every rank."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from distdoctor.procs import kill_tree


@dataclass
class RunResult:
    cmd: list[str]
    returncode: int | None  # None when it timed out
    output: str  # stdout and stderr interleaved, as a user would see them
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def torchrun_cmd(script: str | Path, nproc: int = 2, script_args: list[str] | tuple[str, ...] = (),
                 launcher_args: list[str] | tuple[str, ...] = ()) -> list[str]:
    """`python -m torch.distributed.run --standalone --nproc_per_node=N [launcher args] script -- args`."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           *launcher_args, str(script)]
    if script_args:
        cmd += ["--", *script_args]
    return cmd


def with_open_files_limit(cmd: list[str], limit: int) -> list[str]:
    """cmd run by bash after `ulimit -n limit` (a low open-files limit, as some clusters and containers set)."""
    return ["bash", "-c", f"ulimit -n {limit}; {shlex.join(cmd)}"]


def run(cmd: list[str], timeout: float = 120, cwd: str | Path | None = None,
        env: dict[str, str] | None = None) -> RunResult:
    """Run cmd in its own process group; on timeout kill the whole group (all ranks and the agent)."""
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True, errors="replace")
    try:
        out, _ = proc.communicate(timeout=timeout)
        return RunResult(cmd, proc.returncode, out, False)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)  # torchrun puts workers in their own sessions: killpg alone leaves them
        out, _ = proc.communicate()
        return RunResult(cmd, None, out, True)


def run_torchrun(script: str | Path, nproc: int = 2, script_args: list[str] | tuple[str, ...] = (),
                 timeout: float = 120, cwd: str | Path | None = None, env: dict[str, str] | None = None,
                 launcher_args: list[str] | tuple[str, ...] = (), whole_lines: bool = False) -> RunResult:
    """Start `script` on `nproc` local ranks with torchrun --standalone and wait for all of them.

    whole_lines: torchrun tees each rank's output line by line, prefixed `[defaultN]:` (`--tee 3`). Without
    it, ranks that print an unbuffered traceback at the same moment can split each other's lines, so a
    caller that looks for an exact error line asks for it."""
    launcher = (*launcher_args, "--tee", "3") if whole_lines else launcher_args
    return run(torchrun_cmd(script, nproc, script_args, launcher), timeout=timeout, cwd=cwd, env=env)


# Programs under evals/ end with one `DISTDOCTOR_OK rank=<r> checksum=<float>` per rank. Ranks share
# one stdout and an unbuffered print writes text and newline separately, so another rank's text may follow
# a checksum directly ("...checksum=1.25step 4 loss ..."): the checksum is read as the float it is.
OK_LINE = re.compile(r"DISTDOCTOR_OK rank=(\d+) checksum=([-+]?(?:nan|inf|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))")


def finished_ranks(output: str) -> dict[int, str]:
    """{rank: checksum} for every rank that printed its DISTDOCTOR_OK line."""
    return {int(rank): checksum for rank, checksum in OK_LINE.findall(output)}


# torch 2.13's gloo sometimes aborts a rank at exit, after destroy_process_group() and all work are done:
# a gloo worker thread still frees the last collective's work (whose tensors have Python objects) while the
# main thread finalizes the interpreter; taking the GIL then ends that thread, which C++ turns into
# std::terminate (backtrace and measured rates: references/backends.md, the teardown abort note under
# gloo_missing_feature). Callers may accept exactly this, and only when all ranks finished.
TEARDOWN_ABORT = "terminate called without an active exception"


def finished_despite_teardown_abort(result: RunResult) -> bool:
    """True when the run failed only through the gloo teardown abort (the caller checks ranks finished)."""
    return not result.timed_out and TEARDOWN_ABORT in result.output


def completed(result: RunResult, done: str | re.Pattern[str], ranks: int) -> bool:
    """Exit 0, or `done` (a regex every rank prints at its end) appears `ranks` times and only the gloo
    teardown abort came after: the job did all its work (see TEARDOWN_ABORT)."""
    if result.ok:
        return True
    return finished_despite_teardown_abort(result) and len(re.findall(done, result.output)) >= ranks


def succeeded(result: RunResult) -> bool:
    """Exit 0, or ranks printed their DISTDOCTOR_OK line and only the gloo teardown abort came after."""
    return completed(result, OK_LINE, 1)
