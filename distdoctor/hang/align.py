"""Align the ranks of a snapshot and name the hang: the odd ranks, the cause (from the taxonomy, with
evidence and the knowledge-base entry that fixes it) and the location — the line of the branch or loop
that diverged, or the odd rank's own frame when nothing diverged in the code.

Rules, in order:
1. a rank the launcher started has no process (exited, zombie): peer_died_first;
2. some ranks wait in a collective while others are in no collective (user code, I/O, data loading, their own
   code called back from inside a collective such as an object's pickling): the latter are stragglers —
   logger_init_all_ranks when they are inside a logger's set-up, checkpoint_all_ranks inside a save,
   collective_timeout otherwise (at the `while` it polls in, when its frame is directly in one; at the
   `X.acquire()` of a lock it waits for that a thread now gone never released); an interactive console
   (code.interact, IPython embed) counts as a debugger stop;
3. ranks wait at different (operation, call site; a rank in new_group waits too): the minority is odd; the
   user's source around its frames says why — a branch on the rank (rank_conditional_collective, or
   checkpoint_all_ranks when the guarded call saves), a branch on data whose sides call different collectives,
   an except clause that `continue`s past the collective in the loop the ranks are at different passes of
   (rank_conditional_collective), a branch inside that loop only some ranks entered (rank_conditional_collective),
   a loop the others have left or not yet left (dataloader_uneven; at its `if ...: break` when it has one), a
   `with` some ranks are still entering while another waits inside it, an early exit, swallowing except clause
   or `if` around the waiting ranks' collective in a function the others have left; a collective in an except or
   finally clause while another rank is in its try body (the rank raised); a non-re-raising handler on the
   looping ranks' call path; the assignment a `while` test reads (each rank leaves on its own value); a loop the
   odd rank has not reached yet is no cause;
4. every rank in init_process_group: the start-up phase and the arguments the ranks passed (init_wait);
5. every rank at the same call site: the Flight Recorder traces name the first collective whose operation,
   sizes or dtypes differ, or a rank that never got there.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from distdoctor.hang import flight_recorder as fr
from distdoctor.hang import init_wait
from distdoctor.hang.frames import GROUP_OPS, called_back, short
from distdoctor.hang.model import GONE, INIT, USER, WAITING, Frame, HostSnapshot, RankSnapshot
from distdoctor.hang.source import (Block, cleanup_clauses, debug_call, enclosing, exit_guards, in_function_of,
                                    line_text, locks_at, loop_exits, loop_test_sets, skipping_handlers,
                                    swallowing_handlers, unreleased_acquires, with_bodies)

SAVE_LIKE = re.compile(r"save|checkpoint|state_dict|consolidate|serializ", re.IGNORECASE)
LOGGER_LIKE = re.compile(r"logger|wandb|mlflow|tensorboard|summarywriter|neptune|comet|clearml|aim_run|"
                         r"(^|\.)init_log|setup_log", re.IGNORECASE)
DEBUGGER = re.compile(r"(^|/)(pdb|bdb|ipdb|pudb|debugpy|pydevd)[^/]*(\.py|/)"  # a debugger's own files
                      r"|/lib/python3\.\d+/code\.py$|/IPython/terminal/embed\.py$")  # an interactive console


@dataclass
class Cause:
    id: str
    score: float
    evidence: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    odd_ranks: list[int] = field(default_factory=list)
    causes: list[Cause] = field(default_factory=list)
    location: dict | None = None  # {file, line, code, why}
    summary: str = ""
    groups: list[dict] = field(default_factory=list)
    flight_recorder: dict | None = None
    checker: list[dict] = field(default_factory=list)  # the static checker's findings on those lines (cli fills it)


def _label(r: RankSnapshot) -> str:
    return f"rank {r.rank if r.rank is not None else '?'}"


def _doing(r: RankSnapshot) -> str:
    what = r.op or r.state
    return f"{what} at {short(r.file)}:{r.line} in {r.function}" if r.file else what


def _location(file: str | None, line: int | None, why: str) -> dict | None:
    if not file:
        return None
    return {"file": file, "line": line, "code": line_text(file, line), "why": why}


def groups_of(ranks: list[RankSnapshot]) -> dict[tuple, list[RankSnapshot]]:
    """Ranks by (state, op, user call site)."""
    out: dict[tuple, list[RankSnapshot]] = defaultdict(list)
    for r in ranks:
        out[(r.state, r.op, r.file, r.line)].append(r)
    return out


def _chains(r: RankSnapshot) -> list[tuple[Frame, tuple[Block, ...]]]:
    return [(f, enclosing(f.file, f.line)) for f in r.path]


def _keys(r: RankSnapshot) -> set[tuple[str, int]]:
    return {b.key for _, blocks in _chains(r) for b in blocks}


def _unique_blocks(odd: RankSnapshot, others: list[RankSnapshot]) -> list[tuple[Frame, Block]]:
    """Blocks around the odd rank's frames that enclose no frame of the other ranks, outermost first."""
    distinct = {tuple((f.file, f.line) for f in o.path): o for o in others}.values()  # one per call path
    shared = set().union(*(_keys(o) for o in distinct)) if others else set()
    return [(f, b) for f, blocks in _chains(odd) for b in blocks if b.key not in shared]


def _entered(r: RankSnapshot, pattern: re.Pattern[str]) -> int | None:
    """Index in r.path of the first user frame whose function matches pattern; len(r.path) when only library
    code below the innermost user frame does (a logger's own package, torch.save); else None."""
    for i, f in enumerate(r.path):
        if pattern.search(f.function):
            return i
    below = r.frames[: r.frames.index(r.path[-1])] if r.path and r.path[-1] in r.frames else []
    if any(pattern.search(f.function) or pattern.search(f.file) for f in below):
        return len(r.path)
    return None


def _exit_guards(odd: RankSnapshot, others: list[RankSnapshot]) -> list[tuple[Frame, Block]]:
    """Early exits on the rank (`if rank != 0: return`) above the odd rank's frames, in functions the other
    ranks are not in: they took the exit, the odd rank went on to its collective (branch "exit")."""
    shared = set().union(*(_keys(o) for o in others)) if others else set()
    out = []
    for f, blocks in _chains(odd):
        inner = [b for b in blocks if b.kind == "def"]
        if inner and inner[-1].key in shared:
            continue
        out += [(f, Block(g.kind, g.file, g.line, g.header, True, "exit")) for g in exit_guards(f.file, f.line)]
    return out


def _split_branches(odd: RankSnapshot, others: list[RankSnapshot]) -> list[tuple[Frame, Block]]:
    """An `if` that the odd rank and another rank are both inside, in different branches (rank 0 all_reduce then
    broadcast, the others the reverse; a barrier where a value is None, an all_reduce where it is not): branch
    "split", on_rank as the test reads the rank or data. Only when their operations differ: the same operation in
    both branches pairs up and is no cause."""
    theirs = {b.key: b.branch for o in others if o.op != odd.op for _, blocks in _chains(o) for b in blocks
              if b.kind == "if"}
    return [(f, Block(b.kind, b.file, b.line, b.header, b.on_rank, "split")) for f, blocks in _chains(odd)
            for b in blocks if b.kind == "if" and theirs.get(b.key, b.branch) != b.branch]


def _skipped(odd: RankSnapshot, others: list[RankSnapshot]) -> tuple[Block, RankSnapshot, RankSnapshot] | None:
    """Why some ranks are past the collective other ranks wait in, read around the waiting ranks' frame: an
    early exit above it (`if batch.numel() == 0: return`, a test on anything) in a function the ranks past it
    have left, or an except clause around it that does not re-raise (a rank that raised went on). Returns
    (the block, a waiting rank, a rank past it), the waiting ranks being the others or the odd ones."""
    for at, past in [(o, odd) for o in others[:1]] + [(odd, o) for o in others[:1]]:
        if not at.file:
            continue
        left = not any(f.file == at.file and in_function_of(at.file, at.line, f.line) for f in past.path)
        guards = exit_guards(at.file, at.line, any_test=True) if left else ()
        if guards:
            return guards[-1], at, past
        beyond = all(f.file != at.file or not in_function_of(at.file, at.line, f.line) or f.line > at.line
                     for f in past.path)
        handlers = swallowing_handlers(at.file, at.line) if beyond else ()
        if handlers:
            return handlers[0], at, past
        conds = [b for b in enclosing(at.file, at.line) if b.kind == "if" and b.branch == "body"
                 and in_function_of(at.file, at.line, b.line)] if left else []
        if conds:  # the waiting ranks' collective is under an `if` (`if sync:`) the ranks past it skipped
            b = conds[-1]
            return Block(b.kind, b.file, b.line, b.header, b.on_rank, "entered"), at, past
    return None


def _raised_into(odd: RankSnapshot, others: list[RankSnapshot]) -> tuple[Block, RankSnapshot, RankSnapshot] | None:
    """A rank waiting in a collective inside an except or finally clause (`finally: dist.barrier()`) while another
    rank is still in that clause's try body: the first rank left the try body (it raised there, its error held back
    by the clean-up) and runs a collective the others never reach. Returns (the clause, the rank in it, a rank in
    its try body)."""
    for inside, other in [(odd, o) for o in others[:1]] + [(o, odd) for o in others[:1]]:
        for f in inside.path:
            for clause, (lo, hi) in cleanup_clauses(f.file, f.line):
                if any(g.file == f.file and lo <= g.line <= hi and in_function_of(f.file, f.line, g.line)
                       for g in other.path):
                    return clause, inside, other
    return None


def _swallowed_below(loop: Block, inside: RankSnapshot) -> Block | None:
    """An except clause that does not re-raise around the call path of a rank inside `loop`, from its frame in the
    loop down (a step wrapper's `except Exception: return False`): a rank that raised there skipped that pass's
    collective and went on. Handlers of StopIteration (the end of the data) do not count."""
    at = next((i for i, f in enumerate(inside.path) if f.file == loop.file and f.line > loop.line
               and in_function_of(loop.file, loop.line, f.line)), None)
    if at is None:
        return None
    for f in inside.path[at:]:
        found = swallowing_handlers(f.file, f.line, ignore=("StopIteration", "StopAsyncIteration"))
        if found:
            return found[-1]
    return None


def _not_reached(loop: Block, r: RankSnapshot) -> bool:
    """Whether rank r is above `loop` in the loop's own function (it has not got to the loop yet: its place there
    is no count of the loop's passes)."""
    return any(f.file == loop.file and f.line < loop.line and in_function_of(loop.file, loop.line, f.line)
               for f in r.path)


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (one of them may be relative to the job's folder, as in a saved snapshot)."""
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _dead_holder(r: RankSnapshot) -> Block | None:
    """For a rank blocked on a lock (futex) at a `with X:` or `X.acquire()` line: an `X.acquire()` elsewhere in its
    file, in a function that releases X in no `finally:` and in which none of the rank's live threads is: a thread
    took the lock there and ended (an exception) before its release."""
    if not r.waits_futex or not r.file:
        return None
    live = [t for t in r.threads if _same_file(str(t.get("file")), r.file)]
    for lock in locks_at(r.file, r.line):
        for acq in unreleased_acquires(r.file, lock):
            if acq.line != r.line and not any(in_function_of(r.file, acq.line, t.get("line")) for t in live):
                return acq
    return None


def _entering(odd: RankSnapshot, others: list[RankSnapshot]) -> tuple[Block, RankSnapshot, RankSnapshot] | None:
    """A `with` that some ranks are still entering (their path runs through its header line: they wait in the
    context manager's __enter__, `main_process_first`'s barrier) while another rank is inside its body, waiting
    in a collective there that pairs with nothing. Returns (the with, a rank in its body, a rank entering)."""
    for inside, entering in [(odd, o) for o in others[:1]] + [(o, odd) for o in others[:1]]:
        at = {(f.file, f.line) for f in entering.path}
        for f in inside.path:
            for w in with_bodies(f.file, f.line):
                if (w.file, w.line) in at:
                    return w, inside, entering
    return None


def _prompt(r: RankSnapshot, base: list[str], v: Verdict) -> None:
    """Rank r is blocked reading typed input (not a debugger's): a question nobody answers holds the others."""
    what = "its standard input" if not r.reads_input.startswith("/dev/") else "the terminal"
    ev = base + [f"it is blocked reading {what} ({r.reads_input}): a question waits for an answer nobody types"]
    if r.file:
        ev.append(f"asked at {short(r.file)}:{r.line}: `{line_text(r.file, r.line)}`")
    if r.frames and r.frames[0].file != r.file:
        ev.append(f"the prompt itself: {r.frames[0].where()}")
    guarded = [b for f in r.path for b in enclosing(f.file, f.line) if b.on_rank]
    ev.append(f"under `{guarded[-1].header}` ({short(guarded[-1].file)}:{guarded[-1].line}): only this rank asks"
              if guarded else "only this rank asks; the others went on")
    v.causes = [Cause("prompt_on_one_rank", 0.9, ev), Cause("collective_timeout", 0.3, base)]
    v.location = _location(r.file, r.line, "the question this rank waits to have answered")


def _polling_loop(r: RankSnapshot) -> Block | None:
    """A rank in its own code directly in the body of a `while` with a condition (not `while True:`) in that
    frame's function: the loop it does not leave (polling for a file, a busy loop); None otherwise."""
    if r.state != USER or not r.file:
        return None
    blocks = enclosing(r.file, r.line)
    inner = blocks[-1] if blocks else None
    return inner if inner is not None and inner.kind == "while" and not inner.forever else None


def _stragglers(waiting: list[RankSnapshot], late: list[RankSnapshot], v: Verdict) -> None:
    r = next((x for x in late if x.reads_input), late[0])
    waits = Counter(f"{w.op} at {short(w.file)}:{w.line}" for w in waiting).most_common(1)[0][0]
    base = [f"{_label(x)} is in no collective: {x.state}, {_doing(x)}" for x in late] + \
           [f"{len(waiting)} other rank(s) wait in {waits}"]
    at_logger = _entered(r, LOGGER_LIKE)
    at_save = _entered(r, SAVE_LIKE)
    in_debugger = [f for f in r.frames if DEBUGGER.search(f.file)]
    if in_debugger:
        stop = debug_call(r.file, r.line)
        ev = base + [f"it sits in a debugger's prompt: {in_debugger[-1].where()} ... {in_debugger[0].where()}",
                     f"stopped at {short(r.file)}:{r.line}: `{line_text(r.file, r.line)}`"]
        if stop is not None:
            ev.append(f"the debugger was entered at {short(stop.file)}:{stop.line}: `{stop.header}`")
        guarded = [b for b in enclosing(r.file, r.line) if b.on_rank] or \
            ([b for b in enclosing(stop.file, stop.line) if b.on_rank] if stop else [])
        ev.append(f"under `{guarded[-1].header}`: only this rank stops, the others wait in their next collective"
                  if guarded else "the other ranks did not stop there: they wait in their next collective")
        v.causes = [Cause("debugger_on_one_rank", 0.9, ev), Cause("collective_timeout", 0.3, base)]
        v.location = _location(r.file, stop.line if stop else r.line,
                               "the debugger stop this rank waits in" if stop else "where the debugger stopped")
    elif at_logger is not None:
        call = r.path[max(at_logger - 1, 0)]
        guarded = [b for b in enclosing(call.file, call.line) if b.on_rank]
        ev = base + [f"it is inside the logger's set-up: {r.path[min(at_logger, len(r.path) - 1)].where()}",
                     f"the logger is made at {short(call.file)}:{call.line}: `{line_text(call.file, call.line)}`"]
        ev.append(f"under `{guarded[-1].header}`" if guarded else
                  "no branch on the rank around it: every rank makes the logger")
        v.causes = [Cause("logger_init_all_ranks", 0.85, ev), Cause("collective_timeout", 0.5, base)]
        v.location = _location(call.file, call.line, "the logger is made on every rank here")
    elif r.reads_input:  # a question of the script's (a tracker's login question is the logger's, above)
        _prompt(r, base, v)
    elif r.waits_lock and (holder := next((w for w in waiting if w.pid == r.waits_lock.get("holder")), None)):
        ev = base + [f"it waits for the file lock on {r.waits_lock['path']}, which {_label(holder)} holds while it "
                     f"waits in {holder.op} at {short(holder.file)}:{holder.line} for this rank: a deadlock between "
                     "a file lock and a collective",
                     "release the lock before any collective (one rank fills the cache under the lock, releases it, "
                     "then all ranks meet in the barrier and read)"]
        v.causes = [Cause("download_race", 0.75, ev), Cause("collective_timeout", 0.5, base)]
        v.location = _location(r.file, r.line, "where this rank waits for the lock another rank holds")
    elif at_save is not None:
        v.causes = [Cause("checkpoint_all_ranks", 0.7, base + ["it is inside a save: " + _doing(r)]),
                    Cause("collective_timeout", 0.6, base)]
        v.location = _location(r.file, r.line, "the straggler's own frame")
    else:
        inside = called_back(r.frames)
        if inside:
            base.append(f"its own code runs inside {inside} (called back by it: pickling its object, a hook): "
                        f"the collective waits for that code to finish")
        ev = base + ["a straggler: the others' collective is not mismatched, it waits for this rank's "
                     + ("data loading" if r.state == "data loading" else
                        "lock, queue or event (its main thread sleeps in futex: something else must release it)"
                        if r.waits_futex else "I/O or compute")]
        ev += [f"its thread {t.get('name')} is at {short(t.get('file'))}:{t.get('line')} in {t.get('function')}"
               for t in r.threads]
        if r.reads_pipe and not r.reads_pipe.get("writers"):
            ev.append(f"it reads a pipe ({r.reads_pipe.get('pipe')}) that no other process holds open: the process "
                      "that was to write into it (a worker it started, a queue's producer) is gone; its exit is the "
                      "cause (run that work in the main process to see its error)")
        w = r.worker
        if w:
            ev.append(f"its DataLoader worker (pid {w.get('pid')}) is in the dataset's code: "
                      f"{short(w.get('file'))}:{w.get('line')} in {w.get('function')}")
        poll = _polling_loop(r)
        holder = _dead_holder(r) if not w else None
        if holder is not None:
            ev.append(f"the lock it waits for is taken at {short(holder.file)}:{holder.line} `{holder.header}`, in a "
                      "function that releases it in no `finally:`, and no thread of this rank is there now: the "
                      "thread that took it ended (an exception) without releasing it")
        if poll is not None and not w:
            ev.append(f"it is in `{poll.header}` at {short(poll.file)}:{poll.line}, at line {r.line}: a loop whose "
                      "condition has not become false (a file, flag or value another process was to provide)")
        v.causes = [Cause("collective_timeout", 0.8, ev)]
        v.location = _location(w.get("file"), w.get("line"), f"where rank {r.rank}'s DataLoader worker is") \
            if w else _location(holder.file, holder.line, "where a thread that is gone took the lock this rank "
                                "waits for") if holder else \
            _location(poll.file, poll.line, "the loop the straggler does not leave") if poll else \
            _location(r.file, r.line, "the straggler's own frame")
    v.odd_ranks = sorted(x.rank for x in late if x.rank is not None)
    v.summary = f"{', '.join(_label(x) for x in late)} never reached the collective the others wait in" + \
        {"debugger_on_one_rank": ": stopped in a debugger", "prompt_on_one_rank": ": waiting for typed input"}.get(
            v.causes[0].id, "")


def _diverged(groups: dict[tuple, list[RankSnapshot]], v: Verdict) -> None:
    ordered = sorted(groups.values(), key=lambda g: (len(g), min((x.rank or 0) for x in g)))
    small = [g for g in ordered if len(g) == len(ordered[0])]
    # a tie in size: the group whose frames sit under a branch on the rank (or a loop) the others are not in
    scored = []
    for g in small:
        others = [x for h in groups.values() if h is not g for x in h]
        blocks = _unique_blocks(g[0], others) + _exit_guards(g[0], others) + _split_branches(g[0], others)
        scored.append((any(b.on_rank for _, b in blocks), bool(blocks), g, blocks, others))
    scored.sort(key=lambda s: (not s[0], not s[1]))
    _, _, odd, blocks, others = scored[0]
    r = odd[0]
    v.odd_ranks = sorted(x.rank for x in odd if x.rank is not None)
    theirs = Counter(f"{o.op or o.state} at {short(o.file)}:{o.line}" for o in others).most_common(1)[0][0]
    base = [f"{', '.join(_label(x) for x in odd)}: {_doing(r)}", f"the other ranks: {theirs}"]
    guard = next((b for _, b in blocks if b.on_rank and b.kind == "def"), None) or \
        next((b for _, b in blocks if b.on_rank), None) or \
        next((b for _, b in blocks if b.branch == "split"), None)  # a branch on data that splits the ranks
    loop, inside = next((b for _, b in blocks if b.kind in ("for", "while")), None), r
    if loop is None:  # the others may still be in a loop this rank has left
        for o in others[:1]:
            loop, inside = next((b for _, b in _unique_blocks(o, odd) if b.kind in ("for", "while")), None), o
        if loop is not None and _not_reached(loop, r):  # ...or not yet reached: their passes are no cause
            loop = None
    raised = _raised_into(r, others) if guard is None else None
    if raised is not None:
        loop = None
    # an except clause in that loop that `continue`s above the collective: a rank that raised there skipped it
    skip = next(iter(skipping_handlers(loop.file, loop.line, next((f.line for f in inside.path if f.file ==
                                                                     loop.file and f.line > loop.line), None))),
                None) if loop is not None and guard is None else None
    swallowed = skip is None and loop is not None and guard is None
    if swallowed:  # or a handler that does not re-raise around the call path to the collective, further in
        skip = _swallowed_below(loop, inside)
    # a branch inside that loop that only some ranks entered (`if should_log(step):` whose test calls a helper):
    # their extra collective there pairs with the others' next one
    entered = next((b for g, o in ((r, others), (others[0], odd)) if g is not None and o
                    for _, b in reversed(_unique_blocks(g, o)) if b.kind == "if" and b.branch == "body"
                    and b.file == loop.file and b.line > loop.line), None) \
        if loop is not None and guard is None and others else None
    if guard is None and skip is None and entered is not None:
        guard = Block(entered.kind, entered.file, entered.line, entered.header, entered.on_rank, "entered")
    if guard is None and raised is not None:
        clause, in_clause, in_try = raised
        ev = base + [f"{_label(in_clause)} waits in {in_clause.op} inside `{clause.header}` at "
                     f"{short(clause.file)}:{clause.line}, the clean-up of a try whose body {_label(in_try)} is "
                     f"still in: {_label(in_clause)} left that body "
                     + ("(it raised there" if clause.kind == "except" else "(it raised there, or ran out of work "
                        "first") + "; an error waits behind this collective, unseen) and runs a collective the "
                     "other ranks do not reach: a clean-up clause must hold no collective"]
        v.causes = [Cause("rank_conditional_collective", 0.8 if clause.kind == "except" else 0.7, ev),
                    Cause("dataloader_uneven", 0.45, ev), Cause("peer_died_first", 0.4, ev)]
        v.location = _location(clause.file, clause.line, "the clean-up clause a rank that raised waits in")
    elif guard is not None:
        where = f"`{guard.header}` at {short(guard.file)}:{guard.line} ({'its body' if guard.branch != 'else' else 'its else branch'})" \
            if guard.kind == "if" else f"`{guard.header}` at {short(guard.file)}:{guard.line}"
        ev = base + [f"{_label(r)} got there through {where}; the other ranks did not"]
        if guard.branch == "exit":
            ev[-1] = (f"`{guard.header}` at {short(guard.file)}:{guard.line} ends in an early exit above "
                      f"{r.op}: the other ranks took it and left, {_label(r)} did not")
        elif guard.branch == "entered":
            ev[-1] = (f"the ranks in {r.op if inside is r else others[0].op} got there through `{guard.header}` at "
                      f"{short(guard.file)}:{guard.line} inside `{loop.header}`; the other ranks did not enter it "
                      "and went on to their next collective")
        elif guard.branch == "split":
            ev[-1] = (f"the ranks are in different branches of `{guard.header}` at {short(guard.file)}:{guard.line}"
                      ", which call collectives in a different order (collectives pair by order, not by name)")
            if not guard.on_rank:
                ev.append("its test is on data, not on the rank: the data differs by rank, so the ranks took "
                          "different branches")
        if r.op in GROUP_OPS:
            ev.append(f"{r.op} is itself collective: every rank of the job must call it, in the same order")
        first = next((i for i, f in enumerate(r.path) if f.file == guard.file and f.line >= guard.line), len(r.path))
        below = r.path[first:] if guard.kind == "def" else [f for f in r.path if f.line >= guard.line]
        saving = [f for f in below if SAVE_LIKE.search(f.function)] or \
                 [f for f in below if SAVE_LIKE.search(line_text(f.file, f.line))]
        if saving:
            v.causes = [Cause("checkpoint_all_ranks", 0.9, ev + [f"the guarded call saves a checkpoint: "
                                                                 f"{saving[0].where()} runs {r.op}"]),
                        Cause("rank_conditional_collective", 0.6, ev)]
        else:
            v.causes = [Cause("rank_conditional_collective", 0.9, ev + [
                f"{r.op} is paired with another collective on the other ranks" if guard.branch == "split"
                else f"{r.op} runs on some ranks only"])]
        v.location = _location(guard.file, guard.line, "the branch on the rank that sent the odd rank(s) there"
                               if guard.on_rank else "the branch that sent the ranks to different collectives")
    elif skip is not None:
        ev = base + [f"`{loop.header}` at {short(loop.file)}:{loop.line}: the ranks are at different passes of this "
                     "loop (collectives pair by order)",
                     f"`{skip.header}` at {short(skip.file)}:{skip.line} "
                     + ("catches errors raised on the way to the collective and goes on without re-raising"
                        if swallowed else "ends in `continue`")
                     + ": a rank that raised there skipped that pass's collective, and is one collective ahead of "
                       "the others"]
        v.causes = [Cause("rank_conditional_collective", 0.8, ev), Cause("dataloader_uneven", 0.4, base + ev[1:2])]
        v.location = _location(skip.file, skip.line, "the except clause that skips the collective on a rank "
                                                     "that raised")
    elif loop is not None:
        ev = base + [f"`{loop.header}` at {short(loop.file)}:{loop.line}: some ranks are still in this loop and "
                     "the others have left it, so the ranks ran it a different number of times"]
        if loop.on_rank:
            ev.append("the loop runs over data split by rank")
        v.causes = [Cause("dataloader_uneven", 0.85, ev), Cause("rank_conditional_collective", 0.4, base)]
        v.location = _location(loop.file, loop.line, "the loop the ranks ran a different number of times")
        stop = next(iter(loop_exits(loop.file, loop.line)), None)
        sets = loop_test_sets(loop.file, loop.line)
        if stop is None and sets:  # `while not converged:`, `converged` computed by each rank from its own values
            ev.append(f"its test `{loop.header}` reads what `{sets[-1].header}` at {short(sets[-1].file)}:"
                      f"{sets[-1].line} computes on each rank from that rank's own values: the ranks leave the loop "
                      "after different numbers of passes, and the collective in it runs on some ranks only")
            v.causes = [Cause("rank_conditional_collective", 0.85, ev), Cause("dataloader_uneven", 0.5, ev[:3])]
            v.location = _location(sets[-1].file, sets[-1].line, "the per-rank value the loop's test reads")
        if stop is not None:  # the per-rank test that let some ranks leave the loop first
            ev.append(f"`{stop.header}` at {short(stop.file)}:{stop.line} breaks out of the loop on a test each rank "
                      "makes on its own (a step limit, a time budget): it held on some ranks before the others")
            v.location = _location(stop.file, stop.line, "the test that let some ranks leave the loop first")
    elif (entering := _entering(r, others)) is not None:
        block, inside, waiting = entering
        v.causes = [Cause("rank_conditional_collective", 0.75, base + [
            f"{_label(waiting)} waits in {waiting.op} entering "
            f"`{block.header}` at {short(block.file)}:{block.line}, {_label(inside)} is inside its body in "
            f"{inside.op}: a block the ranks run one after another must hold no collective"])]
        v.location = _location(block.file, block.line, "the with block some ranks are still entering while "
                                                       "another waits in a collective inside it")
    elif (skipped := _skipped(r, others)) is not None:
        block, at, past = skipped
        how = (f"`{block.header}` at {short(block.file)}:{block.line} above {at.op} ends in an early exit: "
               f"{_label(past)} took it and went on to its next collective, {_label(at)} did not") \
            if block.kind == "if" and block.branch != "entered" else \
            (f"{_label(at)} waits in {at.op} inside `{block.header}` at {short(block.file)}:{block.line}; "
             f"{_label(past)} did not enter it, left the function and went on to its next collective") \
            if block.kind == "if" else \
            (f"`{block.header}` at {short(block.file)}:{block.line} catches an error raised around {at.op} and "
             f"goes on: a rank that raised there ({_label(past)}) skipped the collective, the others wait in it")
        if block.kind == "if" and not block.on_rank:
            how += " (the test is on data, which differs by rank)"
        v.causes = [Cause("rank_conditional_collective", 0.75, base + [how])]
        v.location = _location(block.file, block.line, "the branch only some ranks entered"
                               if block.branch == "entered" else "the exit that took some ranks past the collective"
                               if block.kind == "if" else "the except clause that let a rank skip the collective")
    else:
        v.causes = [Cause("rank_conditional_collective", 0.6, base + [
            "no branch or loop around the frames explains it (source not readable here, or the path differs "
            "in data)"])]
        v.location = _location(r.file, r.line, "the odd rank's own frame")
    v.summary = f"{', '.join(_label(x) for x in odd)} wait at a different collective than the others"


def _flight_recorder(traces: dict[str, list[dict]], v: Verdict) -> bool:
    div = fr.first_divergence(traces)
    if div is None:
        return False
    v.flight_recorder = {"process_group": div.pg, "seq": div.seq, "what": div.what, "odd_ranks": div.odd_ranks,
                         "evidence": div.evidence}
    v.odd_ranks = div.odd_ranks
    frame = div.frame or {}
    what = {"sizes": "the same collective with different sizes", "dtypes": "different dtypes",
            "op": "different operations", "missing": "a collective some ranks never reached"}[div.what]
    ev = [f"Flight Recorder: collective #{div.seq} of process group {div.pg!r} is {what}"] + div.evidence
    if frame.get("file"):
        ev.append(f"called at {short(frame['file'])}:{frame.get('line')}: `{line_text(frame['file'], frame.get('line'))}`")
    if div.what in ("sizes", "dtypes"):  # every rank reached the same collective: its arguments differ by rank
        v.causes = [Cause("collective_shape_mismatch", 0.8, ev),
                    Cause("dataloader_uneven", 0.3, ev[:1] + ["sizes that follow per-rank data"])]
    else:
        v.causes = [Cause("rank_conditional_collective", 0.8, ev)]
    v.location = _location(frame.get("file"), frame.get("line"), "the collective whose arguments differ by rank")
    v.summary = f"rank(s) {', '.join(map(str, div.odd_ranks))}: {what} (Flight Recorder)"
    return True


def analyse(snap: HostSnapshot) -> Verdict:
    v = Verdict()
    ranks = snap.ranks
    alive = [r for r in ranks if r.state not in GONE]
    present = {r.rank for r in alive if r.rank is not None}
    gone = sorted((set(snap.expected_ranks) - present) | {r.rank for r in ranks if r.state in GONE and
                                                           r.rank is not None})
    v.groups = [{"state": k[0], "op": k[1], "file": k[2], "line": k[3], "ranks": sorted(x.rank for x in g if
                                                                                       x.rank is not None)}
                for k, g in sorted(groups_of(alive).items(), key=lambda kv: -len(kv[1]))]
    waiting = [r for r in alive if r.state in WAITING]
    if waiting:  # a rank in new_group while others wait in collectives: it waits for the others too
        waiting += [r for r in alive if r.state == INIT and r.op in GROUP_OPS]
    late = [r for r in alive if r not in waiting and r.state != "unknown"]
    if gone:
        v.odd_ranks = gone
        states = {r.rank: r.state for r in ranks}
        ev = [f"rank {g}: " + ("its process has no Python frame left: it is exiting" if states.get(g) == "exiting"
                               else "no live process (the launcher started it; it exited)") for g in gone]
        if waiting:
            site = Counter((w.file, w.line, w.op) for w in waiting).most_common(1)[0][0]
            ev.append(f"{len(waiting)} rank(s) wait for it in {site[2]} at {short(site[0])}:{site[1]}")
            v.location = _location(site[0], site[1], "where the surviving ranks wait for the rank that is gone")
        v.causes = [Cause("peer_died_first", 0.9, ev)]
        v.summary = f"rank(s) {', '.join(map(str, gone))} are gone; the others wait for them"
    elif waiting and late:
        _stragglers(waiting, late, v)
    elif len(groups_of(waiting)) > 1:
        _diverged(groups_of(waiting), v)
    elif (asking := [r for r in late if r.reads_input and r.state != INIT]) and \
            all(r.state == INIT for r in late if r not in asking):
        r = asking[0]
        _prompt(r, [f"{_label(r)} is in no collective: {r.state}, {_doing(r)}",
                    f"{len(alive) - len(asking)} other rank(s) wait in init_process_group or a collective"], v)
        v.odd_ranks = [x.rank for x in asking if x.rank is not None]
        v.summary = f"{', '.join(_label(x) for x in asking)} waits for typed input; the others wait for it"
    elif alive and all(r.state == INIT for r in alive):
        causes, v.odd_ranks, v.summary = init_wait.explain(alive)
        v.causes = [Cause(*c) for c in causes]
        first = next((r for r in alive if r.file), None)
        if first is not None:
            v.location = _location(first.file, first.line, "where every rank waits for the start-up to complete")
    if snap.flight_recorder and (not v.causes or not gone and len(groups_of(waiting)) == 1 and not late):
        _flight_recorder(snap.flight_recorder, v)
    elif snap.flight_recorder:
        div = fr.first_divergence(snap.flight_recorder)
        if div:
            v.flight_recorder = {"process_group": div.pg, "seq": div.seq, "what": div.what,
                                 "odd_ranks": div.odd_ranks, "evidence": div.evidence}
    if not v.causes:
        v.summary = ("no divergence: every rank is at the same place"
                     + ("" if snap.flight_recorder else "; for collectives that differ in size or order, run with "
                        "TORCH_FR_BUFFER_SIZE=2000 and distdoctor.tracer.watchdog(..., flight_recorder=True), "
                        "then hang.py --fr"))
    v.causes.sort(key=lambda c: -c.score)
    return v
