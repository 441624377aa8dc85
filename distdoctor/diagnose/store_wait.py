"""A c10d store wait that ran out, read key by key: torch's "wait timeout after <N>ms, keys: <keys>".

The store was reached (this is no connection failure): a rank or a torchrun agent waited for a key that nobody
set in time. Which key says who was missing (all produced by torch 2.13, evals/programs/fail_store_wait.py):
- gloo's address keys, `/default_pg/0//cpu//0/<R>` (`/default_pg/0//<G>//cpu//0/<R>` for group G of
  dist.new_group): rank R had not created that process group. The default group: R had not reached
  init_process_group (started late, slow pre-work, stuck or dead before it); a later group: R skipped
  new_group, which every rank must call;
- `.../torchelastic/agent/terminal_state/last_member`: torchrun's exit barrier. This node's workers finished
  and its agent waited for the other nodes' agents; another node failed or still runs (this node exits 0);
- `store_based_barrier_key:...`: torch's store-based barrier (its own message, read by signatures);
- `.../<prefix>/last_member` (any other prefix): torch's store barrier (torch.distributed.elastic.utils.store
  .barrier) that fewer members reached than its world_size: one failed or is late, or the barrier counts more
  members than the job has. Given the rank, torch says it itself: "Timed out waiting on barrier on rank R, for
  key prefix: P (world_size=N, missing_ranks=[...])" (rank 0 lists them; the others point to rank 0);
- any other key is the program's own (store.get / store.wait): the rank that sets it failed, is late, or
  skips the code that sets it; only its log can tell.
READINGS says which causes each kind of wait supports, how strongly, and at what level (`structural`: the key
names the missing rank and what it missed; `symptom`: several causes fit, a candidate only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# torch's store-based barrier after init_process_group, with its counts (older releases log it while waiting)
BARRIER_COUNTS = re.compile(r"store based barrier.*\(world_size=(?P<n>\d+), (?:worker_count|num_workers_joined)=(?P<m>\d+)")
BARRIER_CAUSE = "store_barrier_world_size"
WAIT = re.compile(r"wait timeout after (?P<ms>\d+)ms, keys: (?P<keys>.+?)\s*$")
TRACED = re.compile(r"Timed out waiting on barrier on rank \d+, for key prefix: (?P<prefix>\S*) \(world_size=(?P<n>\d+), "
                    r"missing_ranks=\[(?P<missing>.*?)\], timeout=(?P<s>[\d.]+)\)")
NUMBERS = re.compile(r"\s*\d+(?:\s*,\s*\d+)*\s*")  # "2" or "1, 3": torch's missing_ranks as numbers
_GLOO = re.compile(r"^/?(?P<prefix>.*?)//(?P<device>[a-z]+)//\d+/(?P<rank>\d+)$")
EXIT_BARRIER = "torchelastic/agent/terminal_state"
STORE_BARRIER = "store_based_barrier_key"
MAX_WAITS = 8
ECHO_CAUSE = "peer_died_first"
REACHED = "rendezvous_unreachable"  # a store wait proves the store was reached: never this cause
ECHO_WEIGHT = 3.0  # a wait that follows another rank's own error: an echo of it, as a lost connection is
# kind of wait -> [(cause, level, weight, what the reading proves: a template of StoreWait.fields())]
READINGS = {
    "default_group": [
        ("rank_start_skew", "structural", 4.0,
         "a rank waited {ms} ms for rank {ranks}'s address in the default process group (store key {key}): rank "
         "{ranks} had not reached init_process_group; it started late or spent longer before it (a download, "
         "tokenising, loading), or it is stuck or died there: its own log says which"),
        ("peer_died_first", "symptom", 1.0,
         "rank {ranks} never reached init_process_group while this rank waited ({key}); if rank {ranks}'s own "
         "log shows an error, that error is the cause"),
    ],
    "subgroup": [
        ("rank_conditional_collective", "structural", 4.0,
         "a rank waited {ms} ms for rank {ranks} to join process group {group} (store key {key}): dist.new_group "
         "must be called by every rank of the default group, in the same order; rank {ranks} skipped it, or is "
         "late, stuck or dead before it"),
        ("rank_start_skew", "symptom", 1.0,
         "rank {ranks} had not created process group {group} after {ms} ms ({key}): it may only be late"),
    ],
    "exit_barrier": [
        ("peer_died_first", "symptom", 1.0,
         "this node's workers finished, and its torchrun agent waited {ms} ms in the exit barrier for the other "
         "nodes' agents ({key}): another node failed (its own log has the error) or still runs; this node's own "
         "run ended well (torchrun exits 0)"),
    ],
    "member_barrier": [
        ("store_barrier_world_size", "symptom", 1.0,
         "a store barrier ({key}) waited {ms} ms for {size} members and some never checked in{named}: the barrier "
         "may count more members than the job has (a world size from a config, not from the job)"),
        ("peer_died_first", "symptom", 0.8,
         "a member of the store barrier ({key}) never checked in{named}: it may have failed first (its own log)"),
        ("rank_start_skew", "symptom", 0.6,
         "a member of the store barrier ({key}) had not checked in after {ms} ms{named}: it may only be late"),
    ],
    "own": [
        ("peer_died_first", "symptom", 1.0,
         "a rank waited {ms} ms for store key {key}, which the program sets itself: the rank that sets it may "
         "have failed first (its own log has the error)"),
        ("rank_conditional_collective", "symptom", 0.8,
         "nobody set store key {key} in {ms} ms: the code that sets it may run on some ranks only"),
        ("rank_start_skew", "symptom", 0.6,
         "nobody set store key {key} in {ms} ms: the rank that sets it may still be busy with earlier work"),
    ],
}


@dataclass(frozen=True)
class StoreWait:
    ms: int
    keys: tuple[str, ...]
    kind: str                # default_group | subgroup | exit_barrier | store_barrier | own
    group: str | None        # the new_group's name (subgroup)
    ranks: tuple[int, ...]   # the ranks whose gloo address keys were awaited
    where: dict              # file, line, rank, text of the line

    size: int | None = None  # the barrier's world_size (member_barrier, when torch states it)

    def fields(self) -> dict:
        return {"ms": self.ms, "key": ", ".join(self.keys)[:200], "group": self.group,
                "ranks": ", ".join(map(str, self.ranks)), "size": self.size or "its world_size",
                "named": f" (torch names rank {', '.join(map(str, self.ranks))})" if self.ranks else ""}


def key_kind(message: str) -> str | None:
    """The kind of key a store wait's message waited for, or None when the message is no store wait."""
    m = WAIT.search(message)
    return None if m is None else _kind(_keys(m["keys"]))[0]


def _keys(text: str) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(",") if k.strip())


def _kind(keys: tuple[str, ...]) -> tuple[str, str | None, tuple[int, ...]]:
    if any(EXIT_BARRIER in k for k in keys):
        return "exit_barrier", None, ()
    if any(STORE_BARRIER in k for k in keys):
        return "store_barrier", None, ()
    if any(k.endswith("/last_member") for k in keys):
        return "member_barrier", None, ()
    gloo = [_GLOO.match(k) for k in keys]
    if gloo and all(gloo):
        groups = {"//".join(g["prefix"].split("//")[1:]) for g in gloo}  # "default_pg/0//1": group "1"
        if len(groups) == 1:
            group = groups.pop()
            ranks = tuple(sorted({int(g["rank"]) for g in gloo}))
            return ("subgroup" if group else "default_group"), group or None, ranks
    return "own", None, ()


def read(text: str, where: dict) -> StoreWait | None:
    """The store wait one log line reports, or None."""
    t = TRACED.search(text) if "Timed out waiting on barrier" in text else None
    if t is not None:  # torch's own account of a store barrier, with the ranks that never checked in
        # rank 0 lists the ranks ("[2]"); the others point to rank 0 ("[[<check rank 0 (0) for missing rank info>]]")
        numbers = NUMBERS.fullmatch(t["missing"])
        ranks = tuple(sorted({int(r) for r in t["missing"].split(",")})) if numbers else ()
        return StoreWait(int(float(t["s"]) * 1000), (t["prefix"] + "last_member",), "member_barrier", None, ranks,
                         {**where, "text": text[:500]}, int(t["n"]))
    m = WAIT.search(text) if "wait timeout after" in text else None
    if m is None:
        return None
    keys = _keys(m["keys"])
    kind, group, ranks = _kind(keys)
    return StoreWait(int(m["ms"]), keys, kind, group, ranks, {**where, "text": text[:500]})


def keep(waits: list[StoreWait], wait: StoreWait) -> None:
    """Add `wait` to `waits` while under MAX_WAITS; a wait that names ranks has MAX_WAITS places of its own (rank
    0's list of missing ranks may come after many ranks' "check rank 0" lines)."""
    if sum(bool(w.ranks) == bool(wait.ranks) for w in waits) < MAX_WAITS:
        waits.append(wait)


def evidence(waits: list[StoreWait], first: dict | None = None, job_size: int | None = None
             ) -> list[tuple[str, float, dict]]:
    """(cause, weight, evidence line) for every reading of the waits, each (cause, kind of wait) once. `first`:
    another rank's own error shown as the first failure (file, rank, text): a wait elsewhere is its echo.
    `job_size`: the number of ranks the launcher's summary lists (all of the job); a store barrier that waits
    only for ranks beyond it counts more members than the job has."""
    out = []
    seen: set[tuple[str, str]] = set()
    for w in sorted(waits, key=lambda w: not w.ranks):  # a wait that names ranks first, whatever the log's order
        echo = first is not None and (first["file"], first["rank"]) != (w.where["file"], w.where["rank"])
        if w.kind == "member_barrier" and w.ranks and job_size and min(w.ranks) >= job_size:
            if ("store_barrier_world_size", w.kind) not in seen:
                seen.add(("store_barrier_world_size", w.kind))
                out.append(("store_barrier_world_size", 4.0, {
                    **w.where, "kind": "structural",
                    "proves": f"a store barrier ({w.fields()['key']}) of {w.size} members waited for rank "
                              f"{w.fields()['ranks']}, but the launcher lists {job_size} ranks (0-{job_size - 1}): "
                              "the barrier counts more members than the job has"}))
            continue
        if w.kind == "default_group" and w.ranks and job_size and min(w.ranks) >= job_size \
                and ("store_barrier_world_size", w.kind) not in seen:
            # one node's launcher lists ranks 0..job_size-1: rank R may be on another node (then it is late), or the
            # job has no rank R and init_process_group was given a larger world_size; the log cannot tell which
            seen.add(("store_barrier_world_size", w.kind))
            out.append(("store_barrier_world_size", 2.0, {
                **w.where, "kind": "store wait", "symptom": True,
                "proves": f"the ranks waited for rank {w.fields()['ranks']}'s address ({w.fields()['key']}) and the "
                          f"launcher lists {job_size} ranks (0-{job_size - 1}): unless rank {w.fields()['ranks']} "
                          "runs on another node, init_process_group was given a world_size larger than the job "
                          "(a number from the code or a config, not the launcher's WORLD_SIZE)"}))
        for cause, level, weight, proves in READINGS.get(w.kind, []):
            if (cause, w.kind) in seen:
                continue
            seen.add((cause, w.kind))
            ev = {**w.where, "kind": "structural" if level == "structural" else "store wait",
                  "proves": proves.format(**w.fields())}
            if echo and cause == ECHO_CAUSE:
                ev.update(kind="echo", proves=f"{ev['proves']}; the first failure, {first['text'].strip()[:120]!r}, "
                                              "came first: this wait is its echo")
                weight = ECHO_WEIGHT
            elif level == "symptom":
                ev["symptom"] = True
            out.append((cause, weight, ev))
    return out


def missing_ranks(waits: list[StoreWait]) -> list[int]:
    """The ranks whose process-group keys the waiting ranks never saw."""
    return sorted({r for w in waits if w.kind in ("default_group", "subgroup", "member_barrier") for r in w.ranks})


def next_step(waits: list[StoreWait]) -> str:
    """What to read next, from the first wait's kind."""
    w = waits[0]
    f = w.fields()
    if w.kind == "exit_barrier":
        return ("This node finished; its torchrun agent waited for the other nodes' agents in the exit barrier. "
                "Read the other nodes' logs: the one that failed (or ran on) is where the answer is.")
    if w.kind in ("default_group", "subgroup"):
        return (f"Read rank {f['ranks']}'s own log around the time it should have created the process group: an "
                "error there is the cause; a long step before it (downloads, tokenising, loading) means the ranks "
                "start apart; no call at all means it skips the call.")
    if w.kind == "member_barrier":
        size = f" ({w.size})" if w.size else ""
        return (f"Compare the store barrier's world_size{size} with the number of ranks that call it, then "
                "read the log of any member that never checked in" + (f" (rank {f['ranks']})" if w.ranks else "")
                + ": an error there is the cause; otherwise it is late or the barrier counts too many.")
    if w.kind == "own":
        return (f"Find the code that sets store key {f['key']} (store.set / store.add) and read the log of the rank "
                "that runs it: an error there is the cause; otherwise that rank skips the code or is still busy.")
    return "Read every rank's log: the store barrier counts ranks that never arrived."


def short_barrier(text: str) -> bool:
    """A store-based barrier line counting fewer workers than its world_size: some rank has not reached
    init_process_group yet (late, stuck or dead before it: several causes), not a barrier that counts more
    workers than the job has (store_barrier_world_size's own reading)."""
    m = BARRIER_COUNTS.search(text)
    return m is not None and int(m["m"]) < int(m["n"])
