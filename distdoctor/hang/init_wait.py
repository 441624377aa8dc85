"""Every rank waits inside init_process_group: which phase of the start-up they wait in (the rendezvous store,
the store barrier, the backend connecting the ranks to each other) and what the arguments the ranks passed say
(py-spy's locals of the init_process_group frame: world_size, rank, init_method) against the launcher's
WORLD_SIZE and the ranks that exist."""

from __future__ import annotations

from collections import Counter

from distdoctor.hang.frames import short
from distdoctor.hang.model import RankSnapshot

# innermost first: the first of these a rank's stack shows is the phase it waits in
_PHASES = {
    "_store_based_barrier": "barrier",
    "_new_process_group_helper": "backend",
    "_create_c10d_store": "store",
    "_tcp_rendezvous_handler": "store",
    "_env_rendezvous_handler": "store",
    "_file_rendezvous_handler": "store",
}
_PHASE_WORDS = {
    "store": "the rendezvous store (every process of the world must connect to it before any goes on)",
    "barrier": "the store barrier after the rendezvous (it counts the processes that joined against world_size)",
    "backend": "the backend's start-up, after the rendezvous (each rank connects to every other rank of world_size)",
}
INIT_ARGS = ("world_size", "rank", "init_method")  # read from py-spy's locals of the init_process_group frame


def phase(r: RankSnapshot) -> str | None:
    """The start-up phase a rank waits in, from its stack: store, barrier, backend, or None."""
    for f in r.frames:
        found = _PHASES.get(f.function.rsplit(".", 1)[-1])
        if found:
            return found
    return None


def init_args(frames: list[dict]) -> dict | None:
    """world_size, rank and init_method as passed to init_process_group, from py-spy `dump --locals --json`
    frames (innermost first); None when no such frame shows them. Nothing else of the locals is kept."""
    for f in frames:
        if f.get("name") != "init_process_group":
            continue
        values = {loc.get("name"): loc.get("repr") for loc in f.get("locals") or []}
        out: dict = {}
        for key in ("world_size", "rank"):
            text = values.get(key)
            if isinstance(text, str) and text.isdigit():  # -1, torch's default: the launcher's value is used
                out[key] = int(text)
        method = values.get("init_method")
        if isinstance(method, str) and len(method) >= 2 and method[0] == method[-1] == '"':
            out["init_method"] = method[1:-1]
        return out or None
    return None


def _common(values: list) -> object:
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None


def explain(ranks: list[RankSnapshot]) -> tuple[list[tuple[str, float, list[str]]], list[int], str]:
    """([(cause id, score, evidence)], odd ranks, summary) for ranks that all wait in init_process_group."""
    seen = sorted(r.rank for r in ranks if r.rank is not None)
    phases = Counter(p for p in map(phase, ranks) if p)
    where = phases.most_common(1)[0][0] if phases else None
    launched = _common([r.world_size for r in ranks])
    args = [r.init or {} for r in ranks]
    given = _common([a.get("world_size") for a in args])
    base = [f"every rank seen ({', '.join(map(str, seen)) or len(ranks)}) waits in init_process_group"
            + (f", in {_PHASE_WORDS[where]}" if where else "")]
    if launched:
        base.append(f"the launcher started a world of {launched} (WORLD_SIZE)")
    site = Counter((r.file, r.line) for r in ranks if r.file).most_common(1)
    if site:
        base.append(f"called at {short(site[0][0][0])}:{site[0][0][1]}")
    causes: list[tuple[str, float, list[str]]] = []
    odd: list[int] = []
    passed_ranks = [a["rank"] for a in args if "rank" in a]
    doubled = sorted(k for k, n in Counter(passed_ranks).items() if n > 1)
    methods = {a["init_method"] for a in args if a.get("init_method")}
    if given and launched and given != launched:
        odd = [k for k in range(min(launched, given), max(launched, given))]
        verb = "waits for rank(s) that will never start" if given > launched else "counts more ranks than it was given"
        causes.append(("store_barrier_world_size", 0.9, base + [
            f"init_process_group was passed world_size={given} (py-spy's view of its arguments) but the launcher "
            f"started {launched} process(es): the start-up {verb} ({', '.join(map(str, odd))}); pass no world_size "
            "and rank with env:// (torchrun sets them), or make the launcher start exactly that many"]))
    elif doubled:
        causes.append(("store_barrier_world_size", 0.85, base + [
            f"several processes passed the same rank to init_process_group ({', '.join(map(str, doubled))}): "
            "another rank is then never filled, and every process waits for it; take the rank from RANK"]))
    elif len(methods) > 1:
        causes.append(("rendezvous_unreachable", 0.9, base + [
            "the ranks were given different rendezvous addresses: " + ", ".join(sorted(methods))
            + "; every rank must name the same MASTER_ADDR:MASTER_PORT (init_method)"]))
    if not causes:
        missing = [k for k in range(launched or 0) if k not in seen] if launched and len(seen) < launched else []
        if missing:
            base.append(f"rank(s) {', '.join(map(str, missing))} are not on the host(s) examined: run "
                        "`hang.py --collect` on every node and `--merge` the snapshots, or check that their "
                        "launcher started and can reach MASTER_ADDR:MASTER_PORT")
            odd = missing
        if where == "barrier":
            causes += [("store_barrier_world_size", 0.7, base), ("rendezvous_unreachable", 0.4, base)]
        elif where == "backend":
            causes += [("rendezvous_unreachable", 0.6, base + [
                "the store was reached; the ranks cannot reach each other at the addresses they advertise (the "
                "host name resolving to a loopback address, the wrong interface: GLOO_SOCKET_IFNAME / "
                "NCCL_SOCKET_IFNAME), or a rank of world_size never came"]), ("store_barrier_world_size", 0.4, base)]
        else:
            causes += [("rendezvous_unreachable", 0.6, base + [
                "a process of the world has not connected to the store at MASTER_ADDR:MASTER_PORT: a node not "
                "started, another address or port given to some rank, a firewall"]),
                ("rank_start_skew", 0.4, base + ["or a node's launcher started late and the others wait for it"])]
    summary = ("every rank waits in init_process_group" + (f" ({where})" if where else "")
               + (f"; {causes[0][0]}" if causes and causes[0][1] >= 0.85 else ": the start-up cannot complete"))
    return causes, odd, summary
