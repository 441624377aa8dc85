"""Turn candidate lines into events: one per Python traceback per rank, one per C++ crash, one per
other error line; mark the torchrun agent's summaries and the echoes of an earlier failure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distdoctor.diagnose.matcher import CompiledSignature
from distdoctor.diagnose.node_ranks import LocalRanks

TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
FRAME = re.compile(r'^\s*File "[^"]*", line \d+(?P<comma>,)? in ')
# (Python's own base class too: `raise Exception("...")` prints "Exception: ...")
EXC_LINE = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|NotMet|Failure)|Exception)"
                      r"\b(?::|\s*$)")
# ERROR as a word of its own: ProcessGroupNCCL's option dump (NCCL_ASYNC_ERROR_HANDLING: 1) is no error
ERRORISH = re.compile(r"Error\b|Error:|Exception\b|ERROR(?!_HANDLING\b)|Fatal Python error|terminate called|what\(\): |"
                      r"Segmentation fault|: error:|^\[?[EF]\d{3,4} \d\d:|^\[[EF] |FAILED|Aborted|core dumped|"
                      # NCCL reports its errors as WARN: "NCCL WARN ...", in 2.2 "include/socket.h:360 WARN ..."
                      r"^(?:[\w/.-]+\.(?:cc|cu|h|cpp|c):\d+ )?NCCL WARN |^[\w/.-]+\.(?:cc|cu|h|cpp|c):\d+ WARN ")
# MosaicML Composer's launcher (composer/cli/launcher.py) on the first rank it found dead (a global rank): a
# launcher's summary (AGENT) that names the failed rank (AGENT_FAILED)
COMPOSER_CRASHED = r"\bRank (?P<composer>\d+) crashed with exit code -?\d+"
# The torchrun agent's own output: summaries of failures it saw, not failures of its own.
AGENT = re.compile(r"torch/distributed/elastic/|torch/distributed/run\.py|torch/distributed/launcher/|"
                   r"ChildFailedError|closing signal SIG|Root Cause \(first observed failure\)|"
                   r"torch\.distributed\.elastic|elastic_launch|launch_agent|"
                   r"^\s*(?:exitcode|error_file|traceback|host|time|rank)\s+:|^\S+\.py FAILED\s*$|"
                   r"^srun: error: \S+: tasks? [\d,-]+: |" + COMPOSER_CRASHED)
# Consequences of another rank's failure (log syntax of gloo, NCCL and the agent).
ECHO = re.compile(r"Connection closed by (?:remote )?peer|Connection reset by peer|closing signal SIGTERM|"
                  r"Signal 15 \(SIGTERM\)|Watchdog caught collective operation timeout|detected by watchdog|"
                  r"ProcessGroupNCCL's watchdog|Connection closed by localRank|Broken pipe|"
                  r"ChildFailedError|remote worker crashing|"
                  # horovod, on every rank once one failed: "Horovod has been shut down. This was caused by an
                  # exception on one of the ranks ..."
                  r"Horovod has been shut down|"
                  # slurmstepd, on the tasks left when srun --kill-on-bad-exit ends the step (not "... DUE TO TIME LIMIT")
                  r"\*\*\* STEP [\d.]+ ON \S+ CANCELLED AT \S+ \*\*\*")
# A rank that reports a timeout was waiting for another: it names a victim, not a culprit.
TIMEOUT = re.compile(r"[Tt]imed out|[Tt]imeout|timed out after|failed to pass monitoredBarrier")
AGENT_FAILED = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<rank>\d+)"
                          # torch.multiprocessing.spawn's parent names the process (its index) that failed
                          r"|[Pp]rocess (?P<spawned>\d+) terminated with (?:signal|exit code|the following error)"
                          # Open MPI's mpirun names the MPI_COMM_WORLD rank (a global rank) that died of a signal
                          r"|mpirun noticed that process rank (?P<mpi>\d+) with PID \S+ on node \S+ exited on signal"
                          r"|" + COMPOSER_CRASHED)
DEAD_PEER = re.compile(r"Connection closed by localRank (?P<rank>\d+)")
SUMMARY_RANK = re.compile(r"^\s*rank\s*:?\s*(?P<rank>\d+)(?: \(local_rank: (?P<local>\d+)\))?")
SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+)|.*\)exitcode: (?P<code2>-?\d+)")
SUMMARY_TIME = re.compile(r"^\s*time\s*:\s*(?P<time>\S+)")
# a summary entry whose worker wrote its error file (@record): torchrun quotes the rank's own traceback
SUMMARY_TRACEBACK = re.compile(r"^\s*traceback\s*:\s*Traceback \(most recent call last\)")
SIGTERM = -15  # the agent's own stop signal to the workers left after a failure
SIGABRT = -6
# srun's report of its tasks (a task id is the rank where srun starts the workers itself):
# "srun: error: vm: task 1: Exited with exit code 1", "srun: error: vm: task 0: Terminated"
SRUN_EXIT = re.compile(r"^srun: error: \S+: tasks? (?P<tasks>\d+(?:[-,]\d+)*): (?:Exited with exit code (?P<code>\d+)"
                       r"|(?P<signal>.+?))\s*$")
SRUN_SIGNALS = {"Terminated": SIGTERM, "Killed": -9, "Segmentation fault": -11, "Aborted": -6, "Bus error": -7}
# torchrun's agent wrote these (its log lines, its own traceback, its summary); not a worker's frame of @record's
# wrapper (torch/distributed/elastic/multiprocessing/errors/__init__.py), which any script may carry under srun
TORCHRUN = ("torch/distributed/elastic/multiprocessing/api.py", "torch/distributed/elastic/agent/",
            "torch/distributed/run.py", "torch/distributed/launcher/", "torch.distributed.elastic.multiprocessing.api",
            "torch.distributed.elastic.agent", "ChildFailedError", "Root Cause")
# The job's size where a line states it (torch's store barrier, a launcher, a user's print).
WORLD_SIZE = re.compile(r"(?i)\bworld[_ ]size\b\s*[=:]?\s*(?P<n>\d{1,6})\b")
MAX_EVENT_LINES = 24
MAX_EVENTS = 1000
MAX_TEXT = 1000    # characters of a line kept in an event (matching saw up to 64 KiB)


@dataclass
class Line:
    src: int
    file: str
    line: int
    rank: int | None
    ts: tuple | None
    text: str
    hits: list[CompiledSignature]
    body: str = ""   # text without rank prefixes
    local: bool = False  # rank is a local rank (torchrun's [default1]:, a --log-dir folder), not yet the global one
    task: int | None = None  # srun --label's task id ("3: "): the rank, unless each task is a torchrun agent
    by_task: bool = False    # rank is that task id


@dataclass
class Event:
    kind: str                     # traceback | crash | line
    first: Line
    lines: list[Line] = field(default_factory=list)
    closed: bool = False

    @property
    def rank(self) -> int | None:
        return self.first.rank

    inherited_ts: tuple | None = None   # from the logging line just before a traceback
    reported: bool = False              # a rank's traceback that torchrun's summary quotes (@record's error file)

    @property
    def ts(self) -> tuple | None:
        for ln in self.lines:
            if ln.ts is not None:
                return ln.ts
        return self.inherited_ts

    @property
    def hits(self) -> list[CompiledSignature]:
        return [h for ln in self.lines for h in ln.hits]

    @property
    def is_agent(self) -> bool:
        return not self.reported and any(AGENT.search(ln.body) for ln in self.lines)

    @property
    def is_echo(self) -> bool:
        if any(h.kind == "root" for h in self.hits):
            return False
        return any(h.kind == "echo" for h in self.hits) or any(ECHO.search(ln.text) for ln in self.lines)

    @property
    def is_timeout(self) -> bool:
        return any(TIMEOUT.search(ln.body) for ln in self.lines if EXC_LINE.match(ln.body.strip())
                   or ERRORISH.search(ln.body))

    @property
    def is_error(self) -> bool:
        if self.kind == "traceback" and len(self.lines) == 1:
            return False  # a header whose frames and exception went to another event
        if self.kind != "line":
            return True
        if len(self.lines) == 1 and self.first.body.rstrip().endswith(":") and not self.first.hits:
            return False  # a header ("ERROR Traceback:", "failed due to:") announcing text that did not follow
        return any(ERRORISH.search(ln.body) or (FRAME.match(ln.body) and not FRAME.match(ln.body)["comma"])
                   or any(h.kind == "root" for h in ln.hits) for ln in self.lines)

    def key_line(self) -> Line:
        """The line that best shows the failure: a root match, else the exception line."""
        for exc_only in (True, False):
            for ln in self.lines:
                if any(h.kind == "root" for h in ln.hits) and (EXC_LINE.match(ln.body) or not exc_only):
                    return ln
        for ln in reversed(self.lines):
            if EXC_LINE.match(ln.body):
                return ln
        for ln in self.lines:
            if ERRORISH.search(ln.body) and not FRAME.match(ln.body):
                return ln
        if self.kind == "traceback" and len(self.lines) > 1:
            return self.lines[-1]  # cut before its exception line: the last frame is where it failed
        return self.first


@dataclass
class SummaryEntry:
    """One failure listed in torchrun's ChildFailedError summary."""

    rank: int
    line: Line
    root: bool                  # listed under "Root Cause (first observed failure)"
    exitcode: int | None = None
    exit_line: Line | None = None
    time: str | None = None     # as the table prints it: seconds, so ties are common

    @property
    def distinctive(self) -> bool:
        """Killed by a signal, or an exit code other than the 1 that a Python exception (like the one a peer's
        death raises) leaves. Not the agent's SIGTERM, nor SIGABRT: NCCL's watchdog aborts the ranks that
        waited on a dead peer with it, as a rank's own C++ error does."""
        return self.exitcode is not None and self.exitcode not in (1, SIGTERM, SIGABRT)


class EventBuilder:
    """Feed candidate lines in order of each source; read `events` and the agent's view after."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.open: dict[tuple[int, int | None], Event] = {}
        self.summary: list[SummaryEntry] = []    # torchrun's failure summary, in order
        self.agent_failed: Line | None = None    # first "failed (exitcode: N) local_rank: K"
        self._in_summary: dict[int, bool] = {}   # src -> inside the Root Cause part
        self._time: dict[int, str] = {}          # src -> the time of the summary entry being read
        self.locals = LocalRanks()  # local -> global rank pairs the logs state, per node
        self.srun_exits: list[SummaryEntry] = []  # srun's task exits: the summary where no torchrun ran
        self.torchrun_seen = False                # torchrun's agent wrote to these logs
        self._colon: dict[int, Event] = {}
        self._last_tb: dict[int, Event] = {}
        self._reported: Line | None = None          # the summary's "traceback : Traceback ..." line being read
        self._last_ts: dict[int, tuple[int, tuple]] = {}
        self._seen: set[tuple[int, int | None]] = set()  # (source, rank) pairs that had a line before
        self._seen_first: dict[tuple[int, int | None], Line] = {}  # the first line of each pair
        self.dropped = 0
        self.world_size: int | None = None        # the largest world size a line states

    def _add(self, ev: Event) -> None:
        if len(self.events) < MAX_EVENTS:
            self.events.append(ev)
        else:
            self.dropped += 1

    def keep_hits(self, keep) -> None:
        """Drop the hits `keep` rejects from every line the builder holds (events, torchrun's summary, the
        agent's failure line), before anything judges root vs echo from them."""
        lines = [ln for ev in self.events for ln in ev.lines]
        lines += [ln for e in self.summary for ln in (e.line, e.exit_line) if ln is not None]
        if self.agent_failed is not None:
            lines.append(self.agent_failed)
        for ln in lines:
            ln.hits[:] = [h for h in ln.hits if keep(h)]

    def global_rank(self, ln: Line) -> int | None:
        """A line's global rank: a local rank (torchrun's [default1]: on node 2 of a job, a --log-dir folder's
        number) becomes the global one where the logs pair them for its node (node_ranks); an srun task id is
        no rank where each task ran a torchrun agent."""
        if ln.by_task and self.torchrun_seen:
            return None
        if not ln.local or ln.rank is None:
            return ln.rank
        return self.locals.global_rank(self.locals.node(ln.src, ln.task), ln.rank, self.world_size)

    def globalize(self) -> None:
        """Turn the local ranks of every event's lines into global ones (once the whole input was read)."""
        lines = [ln for ev in self.events for ln in ev.lines]
        if self.agent_failed is not None:
            lines.append(self.agent_failed)
        for ln in lines:
            if ln.local or ln.by_task:
                ln.rank, ln.local, ln.by_task = self.global_rank(ln), False, False

    def ranks_seen(self) -> set[int]:
        """Ranks that wrote any candidate line, or that the agent's summary lists."""
        ranks = {self.global_rank(ln) for ln in self._seen_first.values()}
        return {r for r in ranks if r is not None} | {e.rank for e in self.summary}

    def agent_first(self, echoed: set[int] = frozenset()) -> Line | None:
        """The rank the agent's summary shows failing first, or its line with no rank where the summary
        cannot tell. The agent calls "Root Cause" the failure with the earliest time, in seconds; in a tie,
        the lowest local rank found dead at that check, so a tie says nothing. Set aside: the workers the
        agent stopped itself (SIGTERM) and ranks `echoed` (their own log shows only a peer's death; when
        every failure listed is one of those, the rank that went first exited cleanly or is not listed). Of
        those left: the only one, else the only one with the earliest time, else the only one with a
        distinctive exit (a signal, a code other than 1) while the others exited 1."""
        root = next((e for e in self.summary if e.root), None)
        own = [e for e in self.summary if e.exitcode != SIGTERM and e.rank not in echoed]
        pick = None
        if len(own) == 1:
            pick = own[0]
        elif own:
            times = [e.time for e in own]
            earliest = [e for e in own if e.time == min(times)] if None not in times else own
            distinctive = [e for e in own if e.distinctive]
            if len(earliest) == 1:
                pick = earliest[0]
            elif len(distinctive) == 1 and all(e.exitcode == 1 for e in own if e is not distinctive[0]):
                pick = distinctive[0]
        if pick is not None or root is not None:
            shown = pick or root
            ln = shown.exit_line or shown.line  # "exitcode : -9 (pid: 7) (SIGKILL)" says more than "rank : 1"
            return Line(ln.src, ln.file, ln.line, pick.rank if pick else None, ln.ts, ln.text, ln.hits, ln.body)
        ln = self.agent_failed  # "failed (exitcode: 1) local_rank: 0": the same choice, without the table
        if ln is not None and ln.rank in echoed:
            return Line(ln.src, ln.file, ln.line, None, ln.ts, ln.text, ln.hits, ln.body)
        return ln

    def _summary(self, ln: Line, body: str) -> None:
        if "Root Cause" in body:
            self._in_summary[ln.src] = True
            return
        if body.strip().endswith("Failures:"):  # "Failures:", in torch 1.9-1.10 "Other Failures:"
            self._in_summary[ln.src] = False
            return
        if ln.src not in self._in_summary:
            return
        m = SUMMARY_TIME.match(body)
        if m:
            self._time[ln.src] = m["time"]
            return
        m = SUMMARY_RANK.match(body)
        if m:
            ln.rank, ln.local, ln.by_task = int(m["rank"]), False, False
            if m["local"] is not None:
                self.locals.pair(self.locals.node(ln.src, ln.task), int(m["local"]), ln.rank)
            self.summary.append(SummaryEntry(ln.rank, ln, self._in_summary[ln.src], time=self._time.pop(ln.src, None)))
            return
        m = SUMMARY_EXIT.match(body)
        if m and self.summary and self.summary[-1].exitcode is None:
            self.summary[-1].exitcode = int(m["code"] or m["code2"])
            self.summary[-1].exit_line = ln
            return
        if self.summary and SUMMARY_TRACEBACK.match(body):
            rank = self.summary[-1].rank
            if not any(e.rank == rank and e.is_error for e in self.events):  # the rank's own lines say it already
                ln.rank, ln.local, ln.by_task = rank, False, False
                self._reported = ln

    def _adopt(self, ln: Line, body: str) -> None:
        """An unprefixed exception line whose message names its rank ("... on ranks. Rank 1 is running
        collective", C++'s "what():  [Rank 2] ...") ends the unprefixed traceback or crash open before it:
        that one is the rank's."""
        ev = self.open.get((ln.src, None))
        if ev is None or ev.closed or (ln.src, ln.rank) in self.open:
            return
        stripped = body.strip()
        if not (ev.kind == "traceback" and EXC_LINE.match(stripped) or ev.kind == "crash" and stripped.startswith("what():")):
            return
        for prev in ev.lines:
            prev.rank = ln.rank
        self.open[(ln.src, ln.rank)] = self.open.pop((ln.src, None))
        self._seen.add((ln.src, ln.rank))

    def _srun(self, ln: Line) -> None:
        m = SRUN_EXIT.match(ln.body)
        if m is None:
            return
        code = int(m["code"]) if m["code"] else SRUN_SIGNALS.get(m["signal"].replace(" (core dumped)", ""))
        for part in m["tasks"].split(","):
            lo, _, hi = part.partition("-")
            for task in range(int(lo), int(hi or lo) + 1):
                if len(self.srun_exits) < 4096:
                    self.srun_exits.append(SummaryEntry(task, ln, False, code, ln))

    def exits_from_srun(self) -> None:
        """Where no torchrun agent wrote a summary (srun started the workers), srun's task exits are it.
        Under `srun torchrun ...` a task is a node, not a rank: ignored then."""
        if not self.summary and not self.torchrun_seen:
            self.summary = self.srun_exits

    def _header_of(self, ln: Line, key: tuple[int, int | None]) -> Event | None:
        """The one-line error event on the line just before traceback header `ln`, of the same source and rank
        (a logger's record that the traceback belongs to: logger.exception), else None."""
        last = self.events[-1] if self.events else None
        if last is None or last.kind != "line" or len(last.lines) != 1 or last.closed:
            return None
        head = last.first
        # (the same line number: both came out of one JSON-object line, its message and its traceback field)
        if (head.src, head.rank) != key or head.line not in (ln.line - 1, ln.line) or TRACEBACK.search(head.body):
            return None
        return last if ERRORISH.search(head.body) and not EXC_LINE.match(head.body.strip()) else None

    def feed(self, ln: Line, body: str) -> None:
        if len(ln.text) > MAX_TEXT:
            ln.text, ln.body = ln.text[:MAX_TEXT], ln.body[:MAX_TEXT]
            body = ln.body
        self._summary(ln, body)
        if not self.torchrun_seen and any(t in body for t in TORCHRUN):
            self.torchrun_seen = True
        if body.startswith("srun: error: "):
            self._srun(ln)
        if "orld" in body:
            m = WORLD_SIZE.search(body)
            if m and 1 < int(m["n"]) <= 1_000_000:
                self.world_size = max(self.world_size or 0, int(m["n"]))
        if self.agent_failed is None:
            m = AGENT_FAILED.search(body)
            if m:  # torchrun's "local_rank: N" is a local rank; spawn's process index is the rank
                rank = int(m["rank"] or m["spawned"] or m["mpi"] or m["composer"])
                self.agent_failed = Line(ln.src, ln.file, ln.line, rank, ln.ts, ln.text,
                                         ln.hits, body, local=m["rank"] is not None, task=ln.task)
        cont = self._colon.pop(ln.src, None)
        if cont is not None and ln.rank is None and ln.line == cont.lines[-1].line + 1:
            # "ERROR Training failed due to:" then the message on the next, unprefixed line
            _inherit(ln, cont.first)
            cont.lines.append(ln)
            return
        if ln.rank is not None and body == ln.text:
            self._adopt(ln, body)
        key = (ln.src, ln.rank)
        ev = self.open.get(key)
        if ev is None and ln.rank is None:
            # a logger that prefixes only the first line of a multi-line traceback
            last = self._last_tb.get(ln.src)
            if last is not None and not last.closed and not TRACEBACK.search(body):
                key, ev = (ln.src, last.rank), last
                _inherit(ln, last.first)
        first_of_rank = key not in self._seen
        self._seen.add(key)
        self._seen_first.setdefault(key, ln)
        last_ts = self._last_ts.get(ln.src)
        if ln.ts is not None:
            self._last_ts[ln.src] = (ln.line, ln.ts)
        if TRACEBACK.search(body):
            if ev is not None:
                ev.closed = True
            header = self._header_of(ln, key)
            ev = Event("traceback", ln, [ln], reported=ln is self._reported)
            if header is not None:
                # logging's logger.exception(): "<time> - name - ERROR - training failed" on the line just before
                # the traceback it prints: one failure, the header its first line
                self.events.remove(header)
                ev.first, ev.lines = header.first, [header.first, ln]
            if last_ts is not None and ln.line - last_ts[0] <= 3:
                ev.inherited_ts = last_ts[1]
            self.open[key] = ev
            self._last_tb[ln.src] = ev
            self._add(ev)
            return
        if "terminate called" in body:
            ev = Event("crash", ln, [ln])
            self.open[key] = ev
            self._add(ev)
            return
        if ev is not None and not ev.closed:
            stripped = body.strip()
            if len(ev.lines) < MAX_EVENT_LINES:
                ev.lines.append(ln)
            elif ln.hits or (ev.kind == "traceback" and EXC_LINE.match(stripped) and not FRAME.match(body)):
                ev.lines[-1] = ln  # a long traceback keeps its exception line, the one that says what failed
            if ev.kind == "crash" and stripped.startswith("what():"):
                ev.closed = True
                self.open.pop(key, None)
            elif ev.kind == "traceback" and EXC_LINE.match(stripped) and not FRAME.match(body):
                ev.closed = True
                self.open.pop(key, None)
            elif ln.line - ev.first.line > 2000:
                ev.closed = True
                self.open.pop(key, None)
            return
        if FRAME.match(body) and FRAME.match(body)["comma"]:
            if first_of_rank:
                # the log (or a quote of it) starts inside this rank's traceback: the rest of it is an event
                ev = Event("traceback", ln, [ln])
                self.open[key] = ev
                self._last_tb[ln.src] = ev
                self._add(ev)
            return  # otherwise a stray traceback frame (its header was not seen): no event of its own
        if ln.rank is None and body.lstrip().startswith("raise ") and not EXC_LINE.match(body.strip()):
            return  # a traceback's source line (`raise X(...`) quoted without its frame: the error line follows
        ev = Event("line", ln, [ln])
        self._add(ev)
        if body.rstrip().endswith(":") and ERRORISH.search(body):
            self._colon[ln.src] = ev


def _inherit(ln: Line, owner: Line) -> None:
    """`ln` continues `owner`'s event: it is that line's rank, however that rank was named."""
    ln.rank, ln.local, ln.task, ln.by_task = owner.rank, owner.local, owner.task, owner.by_task
