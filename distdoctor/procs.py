"""Kill a process and every descendant. torchrun starts its workers in their own sessions, so killing the
agent's process group leaves them running; this walks /proc instead. Also what a process waits on (reading_input)."""
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


# the read(2) system call's number, by machine (/proc/<pid>/syscall names the call by number)
_READ_SYSCALL = {"x86_64": 0, "amd64": 0, "aarch64": 63, "arm64": 63, "riscv64": 63}


def reading_input(pid: int) -> str | None:
    """What the process's main thread is blocked reading when it waits for typed input: its standard input (fd 0)
    or a terminal opened another way (getpass's /dev/tty); the fd's target ("pipe:[..]", "/dev/pts/3"), else None.
    Needs the same rights as py-spy (ptrace) over the process."""
    number = _READ_SYSCALL.get(platform.machine().lower())
    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
        if number is None or len(fields) < 2 or fields[0] != str(number):
            return None
        fd = int(fields[1], 16)
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except (OSError, ValueError):
        return None
    return target if fd == 0 or target.startswith(("/dev/pts/", "/dev/tty")) else None
