"""The first failure: the earliest error event that is not an echo of another rank's failure.

Order is by time where every candidate has a timestamp of one kind (across per-rank files, and inside one
file that joins several ranks' files, where position orders nothing), else by position.
Echoes (peer closed/reset, the agent's SIGTERM, watchdog reports) are set aside; timeouts name a
waiting rank, not a culprit (one rank's lone timeout is read by the cause once it is known: blame_awaited);
the same failure on several ranks means no rank went first, unless another rank reported a peer's death
before the second copy (by time, or between them in one console): then they failed one after the other;
when no worker logged its own failure, the torchrun agent's summary (or NCCL's "closed by localRank N", a local rank) names the rank.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from distdoctor.diagnose.events import DEAD_PEER, Event, EventBuilder, Line
from distdoctor.diagnose.prefixes import NcclRanks


@dataclass
class FirstFailure:
    event: Event | None = None      # the worker's own failure event, when one is in the logs
    line: Line | None = None        # the line that shows it (rank set to the first failing rank or None)
    echoes: list[Event] = field(default_factory=list)
    all_ranks: bool = False         # the same failure on every failing rank: none went first
    waiting: bool = False           # every failing rank timed out waiting for another
    seen_by: str | None = None      # "agent" or "peers" when no worker logged the failure itself
    timed_out: list[int] = field(default_factory=list)  # ranks that reported a timeout (when all waited)
    missing: list[int] = field(default_factory=list)    # ranks of the job that reported none: the awaited ones
    failed: list[int] = field(default_factory=list)     # ranks with an error of their own (not an echo, not a timeout)
    awaited: list[int] = field(default_factory=list)    # one rank timed out: the job's other ranks (it waited for them)


def _order(ev: Event, all_ts: bool) -> tuple:
    return (ev.ts, ev.first.src, ev.first.line) if all_ts else (ev.first.src, ev.first.line)


def _blur(text: str) -> str:
    return re.sub(r"0x[0-9a-f]+|\d+", "N", text.strip())[:300]


def _signature(ev: Event):
    """What failed, comparable across ranks: the signatures matched, else the blurred failure text."""
    hits = frozenset((h.cause, h.index) for h in ev.hits if h.kind != "echo")
    return hits or _blur(ev.key_line().body)


def find_first_failure(builder: EventBuilder, nccl: NcclRanks | None = None) -> FirstFailure:
    """Find the first failure among the events of all sources (`nccl`: what NCCL's lines said of its ranks)."""
    builder.globalize()
    builder.exits_from_srun()
    errors = [e for e in builder.events if e.is_error and not e.is_agent]
    echoes = [e for e in errors if e.is_echo]
    candidates = [e for e in errors if not e.is_echo]
    own = {e.rank for e in candidates}
    echoed = {e.rank for e in echoes if e.rank is not None and e.rank not in own}
    if own == {None}:
        # every own failure is unlabelled: a rank's child (a DataLoader worker, a compiler) prints without its
        # rank's prefix while the rank itself reports only the broken pipe to it, so no echo is set aside
        echoed = set()
    agent = builder.agent_first(echoed)
    if candidates:
        all_ts = _timed(candidates)
        candidates.sort(key=lambda e: _order(e, all_ts))
        failed = [e for e in candidates if not e.is_timeout]
        if not failed:
            # only timeouts: the ranks that report one were waiting. One such rank is the failure
            # the agent acted on; several waiting ranks mean none failed first.
            first = candidates[0]
            key = first.key_line()
            waiting = {(e.first.src, e.rank) for e in candidates}
            alike = len(waiting) >= 2
            if alike or key.rank is None:
                rank = None if alike else (agent.rank if agent is not None else None)
                key = _with_rank(key, rank)
            timed_out = sorted({e.rank for e in candidates if e.rank is not None})
            echoed = {e.rank for e in echoes if e.rank is not None}  # waiting too: they saw a peer go
            missing = _missing(builder, timed_out, echoed) if alike else []
            if len(missing) == 1 and _whole_job(builder, timed_out):
                # every other rank of the job waited: the one that did not is where the job stopped
                return FirstFailure(first, _with_rank(key, missing[0]), echoes, False, waiting=True,
                                    seen_by="peers", timed_out=timed_out, missing=missing)
            # one rank timed out: it ran a collective the others never joined (the rank to name), or it waited
            # for a rank that was late; which one only the cause tells (blame_awaited, once it is known)
            awaited = _missing(builder, timed_out, echoed, least=1) \
                if not alike and len(timed_out) == 1 and _whole_job(builder, timed_out) else []
            return FirstFailure(first, key, echoes, alike, waiting=alike, timed_out=timed_out, missing=missing,
                                awaited=awaited)
        candidates = failed
        failed_ranks = sorted({e.rank for e in failed if e.rank is not None})
        first = candidates[0]
        key = first.key_line()
        # The same failure on several ranks (or several unlabelled copies): no rank went first.
        sig = _signature(first)
        if first.rank is not None:
            per_rank: dict = {}
            for e in candidates:
                per_rank.setdefault((e.first.src, e.rank), e)
            copies = [e for e in per_rank.values() if _signature(e) == sig]
            alike = len(copies) >= 2 and not _went_first(first, copies, echoes, all_ts)
        else:  # unlabelled lines: copies of the same failure from several processes
            text = _blur(key.body)
            alike = sum(1 for e in candidates if e.rank is None for ln in e.lines if _blur(ln.body) == text) >= 2
            killed = [e.exitcode for e in builder.summary if e.exitcode is not None and e.exitcode < 0
                      and e.exitcode != -15]
            alike = alike or (len(killed) >= 2 and len(set(killed)) == 1)  # the agent saw them all die alike
            if len(builder.summary) == 1:
                alike = False  # the agent saw one failure: the copies are one process repeating itself
        if first.rank is None and not alike and agent is not None:
            key = _with_rank(key, agent.rank)
            if agent.rank is not None:
                failed_ranks = sorted({*failed_ranks, agent.rank})
        if alike:
            key = _with_rank(key, None)
        return FirstFailure(first, key, echoes, alike, failed=failed_ranks)
    killed = [e.exitcode for e in builder.summary if e.exitcode is not None and e.exitcode < 0 and e.exitcode != -15]
    if agent is not None and len(killed) >= 2 and len(set(killed)) == 1:
        # every rank the agent lists died of the same signal: none went first
        return FirstFailure(None, _with_rank(agent, None), echoes, True, seen_by="agent")
    if agent is None:
        # NCCL's "Connection closed by localRank N" names the rank that went away: a LOCAL rank of the
        # reporting line's node, a global one only where NCCL's lines place that node (or show one node)
        for e in builder.events:
            for ln in e.lines:
                m = DEAD_PEER.search(ln.body)
                if m:
                    rank = (nccl or NcclRanks()).global_of_local(ln.text, int(m["rank"]))
                    return FirstFailure(None, _with_rank(ln, rank), echoes, seen_by="peers")
    return FirstFailure(None, agent, echoes, seen_by="agent" if agent is not None else None)



def _timed(events: list[Event]) -> bool:
    """Whether times order these events: each carries one, all of one kind (a full date, glog's month and day, a
    clock alone: kinds do not compare). Then time orders them across sources and inside one that joins several
    ranks' files one after the other (`cat rank_*.log`), where position does not; in a console that is written
    as it happens, time and position agree."""
    if any(e.ts is None for e in events):
        return False
    return len({tuple(part == 0 for part in e.ts[:3]) for e in events}) == 1


def _went_first(first: Event, copies: list[Event], echoes: list[Event], all_ts: bool) -> bool:
    """Whether the first of several ranks that failed alike went first (two ranks failing close together) rather
    than all failing as one. Yes where another rank reported a peer's death (the failure did not strike every
    rank) and the first copy is earlier than the second by time, or, without times, where that report sits
    between the two copies in one source: the job was already coming down when the second rank failed. By
    position alone, copies in different sources (or in files joined without times) order nothing."""
    second = copies[1]
    alike = {e.rank for e in copies}
    others = [e for e in echoes if e.rank is None or e.rank not in alike]
    if all_ts:
        return bool(others) and first.ts < second.ts
    return any(first.first.src == second.first.src == echo.first.src
               and first.first.line < echo.first.line < second.first.line for echo in others)


def _missing(builder: EventBuilder, timed_out: list[int], echoed: set[int] = frozenset(),
             most: int = 16, least: int = 2) -> list[int]:
    """Ranks of the job (0 .. world size - 1, the size as logged, else the highest rank seen + 1) that reported
    neither a timeout nor a peer's death (`echoed`) while the others did: the ones they waited for. Empty
    when the job's size is unknown or too many are missing to point anywhere."""
    if len(timed_out) < least:
        return []
    world = max(builder.world_size or 0, max(builder.ranks_seen() | set(timed_out)) + 1)
    missing = [r for r in range(world) if r not in set(timed_out) | echoed]
    return missing if 0 < len(missing) <= most else []


def _whole_job(builder: EventBuilder, timed_out: list[int]) -> bool:
    """Whether the logs show every rank of the job: a stated world size that the ranks seen reach, or the
    agent's summary listing each rank (the ones it stopped too). Else a rank missing from the timeouts
    may only be missing from an excerpt."""
    world = max(builder.ranks_seen() | set(timed_out)) + 1
    listed = {e.rank for e in builder.summary}
    return builder.world_size == world or listed == set(range(world))


def _with_rank(ln: Line, rank: int | None) -> Line:
    return Line(ln.src, ln.file, ln.line, rank, ln.ts, ln.text, ln.hits, ln.body)


# Causes whose account of a lone timeout blames the rank that was waited for, not the one that timed out:
# the late rank had not reached the collective yet (still in its pre-work) and so reported nothing.
# (rank_conditional_collective is the other reading: the rank that timed out ran a collective alone.)
AWAITED_CAUSES = {
    "rank_start_skew": "rank {waiter} timed out waiting for rank {late}, which was still in its pre-work "
                       "(rank_start_skew): rank {late} fell behind first",
}


def blame_awaited(found: FirstFailure, cause: str | None) -> str | None:
    """Where one rank timed out and the top cause says the rank it waited for is at fault, name that rank
    (in found.line) and return why; else None and `found` stays as it is."""
    if cause not in AWAITED_CAUSES or len(found.awaited) != 1 or found.line is None or found.event is None:
        return None
    waiter, late = found.timed_out[0], found.awaited[0]
    found.line = _with_rank(found.line, late)
    found.missing, found.seen_by, found.waiting = [late], "peers", True
    return AWAITED_CAUSES[cause].format(waiter=waiter, late=late)
