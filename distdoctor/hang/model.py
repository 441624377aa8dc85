"""The hang doctor's data: one snapshot per rank, plain JSON, so snapshots from any number of hosts merge
and are analysed by the same code as two local ranks.

A rank snapshot: {rank, local_rank, host, pid, world_size, state, op, file, line, function, path, frames,
error, worker}. `frames` is the main thread's stack, innermost first ({file, line, function}); `path` is the user's
frames of it, outermost first; `file`/`line`/`function` is the innermost user frame.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SCHEMA_VERSION = 1

# states
COLLECTIVE, P2P, BARRIER, USER, DATA, INIT, EXITING, EXITED, ZOMBIE, UNKNOWN = (
    "collective", "p2p", "barrier", "user code", "data loading", "init", "exiting", "exited", "zombie", "unknown")
WAITING = {COLLECTIVE, P2P, BARRIER}  # states that wait for other ranks
GONE = {EXITING, EXITED, ZOMBIE}  # exiting: alive but no Python frame left (interpreter shut down)


@dataclass
class Frame:
    file: str
    line: int
    function: str

    def where(self) -> str:
        return f"{self.file}:{self.line} {self.function}"


@dataclass
class RankSnapshot:
    rank: int | None
    pid: int | None
    host: str
    local_rank: int | None = None
    world_size: int | None = None
    state: str = UNKNOWN
    op: str | None = None
    file: str | None = None
    line: int | None = None
    function: str | None = None
    path: list[Frame] = field(default_factory=list)  # user frames, outermost first
    frames: list[Frame] = field(default_factory=list)  # the whole main-thread stack, innermost first
    error: str | None = None  # why the stack is missing or partial
    # data loading: a DataLoader worker of this rank stuck in the user's code ({pid, file, line, function})
    worker: dict | None = None
    # start-up: what the rank passed to init_process_group ({world_size, rank, init_method}, from py-spy's locals)
    init: dict | None = None
    # blocked reading typed input: the target of the fd it reads (its stdin "pipe:[..]", a terminal "/dev/pts/3")
    reads_input: str | None = None
    # blocked waiting for a file lock: {"path", "holder": the pid that holds it, or None}
    waits_lock: dict | None = None
    reads_pipe: dict | None = None  # blocked reading a pipe: {"pipe", "writers": other processes holding it}
    waits_futex: bool = False  # blocked on a lock, queue, event or condition (futex) another thread must release
    # the process's other threads that are in the user's code: [{name, file, line, function}] (at most 5)
    threads: list = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "RankSnapshot":
        known = {k: d.get(k) for k in ("rank", "pid", "host", "local_rank", "world_size", "state", "op", "file",
                                        "line", "function", "error", "reads_input")}
        known["waits_futex"] = bool(d.get("waits_futex"))
        known["threads"] = [t for t in d.get("threads") or [] if isinstance(t, dict)]
        known["host"] = known["host"] or "?"
        known["state"] = known["state"] or UNKNOWN
        worker = d.get("worker") if isinstance(d.get("worker"), dict) else None
        init = d.get("init") if isinstance(d.get("init"), dict) else None
        lock = d.get("waits_lock") if isinstance(d.get("waits_lock"), dict) else None
        known["reads_pipe"] = d.get("reads_pipe") if isinstance(d.get("reads_pipe"), dict) else None
        return cls(**known, path=[Frame(**f) for f in d.get("path") or []],
                   frames=[Frame(**f) for f in d.get("frames") or []], worker=worker, init=init, waits_lock=lock)

    @property
    def site(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "-"


@dataclass
class HostSnapshot:
    """What one host's `hang.py --collect` sees: its ranks, the ranks that should be there but are not,
    Flight Recorder traces found, and errors (one line each)."""

    host: str
    ranks: list[RankSnapshot] = field(default_factory=list)
    expected_ranks: list[int] = field(default_factory=list)  # global ranks this host's launcher started
    flight_recorder: dict[str, list[dict]] = field(default_factory=dict)  # rank -> compact FR entries
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    version: int = SCHEMA_VERSION

    def to_json(self) -> dict:
        return {"version": self.version, "host": self.host, "seconds": round(self.seconds, 3),
                "expected_ranks": self.expected_ranks, "errors": self.errors,
                "ranks": [r.to_json() for r in self.ranks], "flight_recorder": self.flight_recorder}

    @classmethod
    def from_json(cls, d: dict) -> "HostSnapshot":
        if not isinstance(d, dict) or not isinstance(d.get("ranks"), list):
            raise ValueError("not a hang snapshot (expected an object with a `ranks` list)")
        return cls(str(d.get("host", "?")), [RankSnapshot.from_json(r) for r in d["ranks"]],
                   [int(r) for r in d.get("expected_ranks") or []],
                   {str(k): v for k, v in (d.get("flight_recorder") or {}).items()},
                   [str(e) for e in d.get("errors") or []], float(d.get("seconds") or 0.0),
                   int(d.get("version") or SCHEMA_VERSION))


def merge(snapshots: list[HostSnapshot]) -> HostSnapshot:
    """One snapshot of the whole job from per-host snapshots (a rank seen twice keeps its first copy)."""
    out = HostSnapshot(",".join(s.host for s in snapshots))
    seen: set[tuple] = set()
    for s in snapshots:
        for r in s.ranks:
            key = (r.rank,) if r.rank is not None else (r.host, r.pid)
            if key not in seen:
                seen.add(key)
                out.ranks.append(r)
        out.expected_ranks += s.expected_ranks
        out.flight_recorder.update(s.flight_recorder)
        out.errors += [f"{s.host}: {e}" for e in s.errors]
        out.seconds = max(out.seconds, s.seconds)
    out.expected_ranks = sorted(set(out.expected_ranks))
    out.ranks.sort(key=lambda r: (r.rank is None, r.rank or 0, r.host, r.pid or 0))
    return out
