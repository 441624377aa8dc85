"""Kill a process and every descendant. torchrun starts its workers in their own sessions, so killing the
agent's process group leaves them running; this walks /proc instead."""
from __future__ import annotations

import os
import signal
from pathlib import Path


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
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
