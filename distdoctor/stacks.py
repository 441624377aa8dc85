"""Find the rank processes of distributed jobs on this host and dump their Python stacks.

Ranks are found through /proc: a process whose environment has RANK (torchrun workers, srun tasks with
RANK mapped) or that is a child of a torchrun agent. Each is dumped with `py-spy dump --pid` when py-spy
is installed; otherwise a rank whose SIGUSR1 is caught (distdoctor.tracer registers faulthandler for it)
gets SIGUSR1 and prints its own stacks to its stderr, i.e. into the job's log.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
INSTALL_HINT = "py-spy is not installed: `pip install py-spy` (then run again; needs ptrace rights: root, " \
               "or `sudo`, or kernel.yama.ptrace_scope=0)"


LAUNCH_VARS = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCH_FR_DUMP_TEMP_FILE",
               "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_JOB_ID", "MASTER_ADDR", "MASTER_PORT",
               "TORCHELASTIC_RUN_ID"}


@dataclass
class RankProcess:
    pid: int
    ppid: int
    rank: str | None
    local_rank: str | None
    world_size: str | None
    cmdline: str
    catches_sigusr1: bool
    env: dict[str, str] | None = None  # the launcher's variables (LOCAL_WORLD_SIZE, TORCH_FR_DUMP_TEMP_FILE, ...)
    zombie: bool = False

    def label(self) -> str:
        return f"pid {self.pid} RANK={self.rank} LOCAL_RANK={self.local_rank} WORLD_SIZE={self.world_size}"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # gone, or not ours to read
        return None


def _environ(pid: int) -> dict[str, str]:
    raw = _read(PROC / str(pid) / "environ") or b""
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _status(pid: int) -> dict[str, str]:
    raw = (_read(PROC / str(pid) / "status") or b"").decode(errors="replace")
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in raw.splitlines())}


def catches_signal(status: dict[str, str], signum: int) -> bool:
    """SigCgt in /proc/<pid>/status: bit signum-1 set means the process installed a handler."""
    try:
        return bool(int(status.get("SigCgt", "0"), 16) >> (signum - 1) & 1)
    except ValueError:
        return False


def find_rank_processes(root_pid: int | None = None) -> list[RankProcess]:
    """Rank processes on this host; with root_pid, only that process (agent or rank) and its descendants."""
    procs: dict[int, tuple[int, dict[str, str], str, dict[str, str]]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        status = _status(pid)
        if not status:
            continue
        cmd = (_read(entry / "cmdline") or b"").replace(b"\0", b" ").decode(errors="replace").strip()
        procs[pid] = (int(status.get("PPid", "0") or 0), status, cmd, {})
    me = os.getpid()
    agents = {pid for pid, (_, _, cmd, _) in procs.items()
              if "torch.distributed.run" in cmd or any(Path(a).name == "torchrun" for a in cmd.split(" ")[:2])}
    wanted: set[int] | None = None
    if root_pid is not None:
        if root_pid not in procs:
            raise LookupError(f"no process {root_pid} on this host")
        wanted = {root_pid}
        changed = True
        while changed:
            changed = False
            for pid, (ppid, *_rest) in procs.items():
                if ppid in wanted and pid not in wanted:
                    wanted.add(pid)
                    changed = True
    out = []
    for pid, (ppid, status, cmd, _) in sorted(procs.items()):
        if pid == me or (wanted is not None and pid not in wanted) or pid in agents:
            continue
        env = _environ(pid)
        if "RANK" not in env and ppid not in agents:
            continue
        exe = Path(cmd.split(" ")[0]).name if cmd else ""
        if "python" not in exe and not status.get("Name", "").startswith(("python", "pt_main")):
            continue
        out.append(RankProcess(pid, ppid, env.get("RANK"), env.get("LOCAL_RANK"), env.get("WORLD_SIZE"), cmd,
                               catches_signal(status, signal.SIGUSR1),
                               {k: v for k, v in env.items() if k in LAUNCH_VARS},
                               status.get("State", "").startswith("Z")))
    ranks = {p.pid for p in out}
    out = [p for p in out if p.ppid not in ranks]  # a rank's own children (DataLoader workers) inherit RANK
    return sorted(out, key=lambda p: (int(p.rank) if (p.rank or "").isdigit() else 1 << 30, p.pid))


def dump(proc: RankProcess, py_spy: str | None, timeout: float = 30.0) -> tuple[bool, str]:
    """Dump one rank. Returns (done, text): py-spy's output, or what was done instead and why."""
    if py_spy:
        try:
            res = subprocess.run([py_spy, "dump", "--pid", str(proc.pid)], capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"py-spy dump timed out after {timeout:g}s"
        return res.returncode == 0, (res.stdout + res.stderr).rstrip()
    if proc.catches_sigusr1:
        try:
            os.kill(proc.pid, signal.SIGUSR1)
        except OSError as exc:
            return False, f"could not signal: {exc}"
        return True, ("sent SIGUSR1 (the process catches it, e.g. distdoctor.tracer's faulthandler); its stacks "
                      "are printed to that rank's stderr / log, not here")
    return False, ("not dumped: no py-spy, and this process does not catch SIGUSR1 (import distdoctor.tracer "
                   "and call watchdog() or register_sigusr1() to allow `kill -USR1`)")


def find_py_spy() -> str | None:
    """py-spy on PATH, else beside this Python (a virtualenv's bin/ that is not on PATH)."""
    return shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))


CLI_HELP = """Dump the Python stacks of every rank process of distributed jobs on this host (run it on each node).

  python scripts/dump_stacks.py              # every rank found on this host
  python scripts/dump_stacks.py --pid 1234   # only the job under this torchrun agent / srun step / rank
  python scripts/dump_stacks.py --list       # only list the rank processes

Uses `py-spy dump` when installed (`pip install py-spy`); without it, sends SIGUSR1 to ranks that catch
it (distdoctor.tracer registers faulthandler for SIGUSR1) so they print their stacks into their own log.
Exit codes: 0 every rank dumped, 1 some not dumped, 3 no rank process found, 2 usage error.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=CLI_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, help="a torchrun agent, srun/slurmstepd or rank pid: only it and its children")
    ap.add_argument("--list", action="store_true", help="list rank processes, dump nothing")
    ap.add_argument("--no-py-spy", action="store_true", help="do not use py-spy even if installed (SIGUSR1 only)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per py-spy dump (default 30)")
    args = ap.parse_args(argv)
    try:
        procs = find_rank_processes(args.pid)
    except LookupError as exc:
        print(f"dump_stacks: {exc}", file=sys.stderr)
        return 2
    if not procs:
        print("dump_stacks: no rank process found on this host (looked for python processes with RANK in "
              "/proc/<pid>/environ or a torchrun parent)", file=sys.stderr)
        return 3
    py_spy = None if args.no_py_spy else find_py_spy()
    if not py_spy and not args.list:
        print(f"dump_stacks: {INSTALL_HINT}; falling back to SIGUSR1 where a rank catches it", file=sys.stderr)
    failed = 0
    for i, proc in enumerate(procs, 1):
        print(f"=== {proc.label()} :: {proc.cmdline[:160]}")
        if args.list:
            continue
        print(f"dump_stacks: {i}/{len(procs)} pid {proc.pid}", file=sys.stderr)
        done, text = dump(proc, py_spy, args.timeout)
        print(text)
        failed += not done
    return 1 if failed else 0
