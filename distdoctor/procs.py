"""Kill a process and every descendant. torchrun starts its workers in their own sessions, so killing the
agent's process group leaves them running; this walks /proc instead. Also what a process's main thread is blocked
in (blocked_call, and what it means: typed input, a file lock, a futex, a pipe)."""
from __future__ import annotations

import os
import platform
import signal
from pathlib import Path


def stat_fields(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, ...); raises OSError when gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()


def _children_of() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(stat_fields(entry.name)[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def children(pid: int) -> list[int]:
    """The direct children of `pid` (a rank's DataLoader workers), in pid order."""
    return sorted(_children_of().get(pid, []))


def descendants(root: int) -> list[int]:
    children = _children_of()
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(root: int) -> None:
    """SIGKILL root, its process group and all its descendants (found before anything is killed)."""
    victims = [root, *descendants(root)]
    try:
        os.killpg(root, signal.SIGKILL)
    except OSError:
        pass
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# system call numbers by machine (/proc/<pid>/syscall names the call by number): read(2), flock(2), fcntl(2)
_READ_SYSCALL = {"x86_64": 0, "amd64": 0, "aarch64": 63, "arm64": 63, "riscv64": 63}
_FLOCK_SYSCALL = {"x86_64": 73, "amd64": 73, "aarch64": 32, "arm64": 32, "riscv64": 32}
_FCNTL_SYSCALL = {"x86_64": 72, "amd64": 72, "aarch64": 25, "arm64": 25, "riscv64": 25}
_FCNTL_WAITS = {7, 38}  # F_SETLKW, F_OFD_SETLKW: fcntl calls that wait for the lock
_FUTEX_SYSCALL = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}


Call = tuple[int, tuple[int, ...]]  # a blocked system call: its number and first arguments
_READ_IT: Call = (-2, ())  # the default of `call` below: read /proc/<pid>/syscall now


def blocked_call(pid: int) -> Call | None:
    """The system call the process's main thread is blocked in, per /proc/<pid>/syscall: (number, its first three
    arguments); None when it is running or the file cannot be read. Needs ptrace rights over the process; read it
    before py-spy stops the process (a stop interrupts the call)."""
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
        return int(fields[0]), tuple(int(f, 16) for f in fields[1:4])
    except (OSError, ValueError, IndexError):
        return None


def _call(pid: int, call: Call | None) -> Call | None:
    return blocked_call(pid) if call is _READ_IT else call


def _read_from(pid: int, call: Call | None) -> tuple[int, str] | None:
    """(fd, what the fd points at) when the main thread is blocked in read(2), else None."""
    call = _call(pid, call)
    if call is None or call[0] != _READ_SYSCALL.get(platform.machine().lower()) or not call[1]:
        return None
    try:
        return call[1][0], os.readlink(f"/proc/{pid}/fd/{call[1][0]}")
    except OSError:
        return None


def reading_input(pid: int, call: Call | None = _READ_IT) -> str | None:
    """What the process's main thread is blocked reading when it waits for typed input: its standard input (fd 0)
    or a terminal opened another way (getpass's /dev/tty); the fd's target ("pipe:[..]", "/dev/pts/3"), else None.
    `call`: its blocked_call, when already read."""
    read = _read_from(pid, call)
    if read is None:
        return None
    fd, target = read
    return target if fd == 0 or target.startswith(("/dev/pts/", "/dev/tty")) else None


def waiting_lock(pid: int, call: Call | None = _READ_IT) -> dict | None:
    """The file lock the process's main thread waits for (flock(2), or fcntl(2) with F_SETLKW): {"path", "holder"}
    with the pid that holds the lock per /proc/locks (None when it is not listed), else None."""
    machine = platform.machine().lower()
    call = _call(pid, call)
    if call is None or len(call[1]) < 2:
        return None
    number, (fd, cmd) = call[0], call[1][:2]
    if not (number == _FLOCK_SYSCALL.get(machine) or (number == _FCNTL_SYSCALL.get(machine) and cmd in _FCNTL_WAITS)):
        return None
    try:
        path = os.readlink(f"/proc/{pid}/fd/{fd}")
        st = os.stat(f"/proc/{pid}/fd/{fd}")
        locks = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holder = None
    for line in locks:
        parts = line.split()
        if len(parts) >= 6 and parts[1] != "->" and parts[5] == where and parts[4] != str(pid):
            holder = int(parts[4])
            break
    return {"path": path, "holder": holder}


def waiting_futex(pid: int, call: Call | None = _READ_IT) -> bool:
    """The process's main thread sleeps in futex(2): it waits for a lock, queue, event or condition that another
    thread (or process, through shared memory) must release."""
    call = _call(pid, call)
    return call is not None and call[0] == _FUTEX_SYSCALL.get(platform.machine().lower())


def reading_pipe(pid: int, call: Call | None = _READ_IT) -> dict | None:
    """The pipe the process's main thread is blocked reading (not its stdin): {"pipe": "pipe:[..]", "writers": the
    other live processes that hold it open}. An empty list means nothing but the reader holds the pipe: whoever was to
    write into it (a worker process, a multiprocessing queue's feeder) is gone. None when it reads no pipe. The walk
    over every process's fds is the costly part: call it only for ranks whose answer is kept."""
    read = _read_from(pid, call)
    if read is None or read[0] == 0 or not read[1].startswith("pipe:"):
        return None
    target = read[1]
    holders = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == pid:
            continue
        try:
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                holders.append(int(entry.name))
        except OSError:
            continue
    return {"pipe": target, "writers": sorted(holders)}
