"""From a py-spy stack to what a rank is doing: its state, the c10d operation it waits in, and the innermost
frame of the user's own code with the user's call path."""

from __future__ import annotations

import re
from pathlib import Path

from distdoctor import paths
from distdoctor.hang.model import BARRIER, COLLECTIVE, DATA, EXITING, INIT, P2P, USER, Frame, RankSnapshot

_LIBRARY = re.compile(r"/(site|dist)-packages/|^<frozen |^<string>|/lib/python3\.\d+/|/lib/pypy3")
_OWN = str(paths.ROOT / "distdoctor") + "/"
C10D = ("torch/distributed/distributed_c10d.py", "torch/distributed/c10d_logger.py")
P2P_OPS = {"send", "recv", "isend", "irecv", "batch_isend_irecv", "send_object_list", "recv_object_list"}
BARRIER_OPS = {"barrier", "monitored_barrier"}
INIT_OPS = {"init_process_group", "new_group", "new_subgroups", "new_subgroups_by_enumeration", "init_device_mesh"}
GROUP_OPS = INIT_OPS - {"init_process_group"}  # made after start-up: every rank of the job must call them, like a collective


def is_library(file: str) -> bool:
    """Python's standard library, installed packages, frozen modules, and distdoctor itself."""
    return bool(_LIBRARY.search(file)) or file.startswith(_OWN)


def _bare(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def main_thread(threads: list[dict], pid: int) -> dict | None:
    """The main thread of a py-spy `dump --json` (its OS thread id is the pid)."""
    for t in threads:
        if t.get("os_thread_id") == pid:
            return t
    for t in threads:
        if t.get("thread_name") == "MainThread":
            return t
    return threads[0] if threads else None


MAX_THREADS = 5  # other threads of a rank listed in its snapshot


def other_threads(threads: list[dict], main: dict) -> list[dict]:
    """The threads of a py-spy dump besides the main one whose stack reaches the user's own code, each as
    {name, file, line, function} of its innermost user frame (at most MAX_THREADS)."""
    out = []
    for t in threads:
        if t is main:
            continue
        user = next((f for f in pyspy_frames(t) if not is_library(f.file)), None)
        if user is not None:
            out.append({"name": t.get("thread_name") or str(t.get("thread_id")), "file": user.file,
                        "line": user.line, "function": user.function})
        if len(out) == MAX_THREADS:
            break
    return out


def pyspy_frames(thread: dict) -> list[Frame]:
    return [Frame(f.get("filename") or "?", int(f.get("line") or 0), f.get("name") or "?")
            for f in thread.get("frames") or []]


def called_back(frames: list[Frame]) -> str | None:
    """The c10d call a stack (innermost first) is inside of while the user's own code runs below it (an object's
    __getstate__ pickled by all_gather_object, a hook): the rank is not waiting in that call but running its
    own code; None otherwise."""
    for i, f in enumerate(frames):
        if f.file.endswith(C10D[0]):
            if any(not is_library(g.file) for g in frames[:i]):
                return next((_bare(g.function) for g in frames[i:] if g.file.endswith(C10D[0])
                             and not g.function.startswith("_")), _bare(f.function))
            return None
    return None


def classify(frames: list[Frame]) -> tuple[str, str | None]:
    """(state, op) of a stack given innermost first. The op is the c10d call nearest the user's code
    (all_gather_object rather than the all_gather it makes). A stack whose user code runs inside a c10d call
    (called_back) is in user code."""
    if called_back(frames):
        return USER, None
    op = None
    for f in frames:
        if f.file.endswith(C10D[0]) and not f.function.startswith("_"):
            op = _bare(f.function)
        elif op is None and f.file.endswith(("torch/_tensor.py", "torch/autograd/__init__.py")) \
                and _bare(f.function) == "backward":
            op = "backward"
    if op in P2P_OPS:
        return P2P, op
    if op in BARRIER_OPS:
        return BARRIER, op
    if op in INIT_OPS or any("torch/distributed/elastic/rendezvous" in f.file for f in frames):
        return INIT, op
    if op:
        return COLLECTIVE, op
    if any("torch/utils/data/" in f.file for f in frames):
        return DATA, None
    return USER, None


def fill(snap: RankSnapshot, frames: list[Frame]) -> RankSnapshot:
    """Set state, op, user frame and path of a snapshot from its stack (innermost first)."""
    snap.frames = frames
    if not frames:
        snap.state, snap.op = EXITING, None
        return snap
    snap.state, snap.op = classify(frames)
    user = [f for f in frames if not is_library(f.file)]
    snap.path = list(reversed(user))
    if user:
        snap.file, snap.line, snap.function = user[0].file, user[0].line, user[0].function
    return snap


def short(file: str | None) -> str:
    """A file name for people: relative to the current folder when below it."""
    if not file:
        return "-"
    try:
        return str(Path(file).resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        return file
