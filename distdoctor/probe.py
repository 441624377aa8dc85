"""Launch probe: started by the job's own launcher (torchrun, srun, ...), every rank checks in and rank 0
judges the launch — who joined, which device each rank binds, whether all_reduce sums right, whether the
backend gives async futures, and how long a few all_reduce sizes take.

The check-in goes through a c10d TCPStore before any process group exists, so a missing rank is named
by number instead of ending as an anonymous "1/2 clients joined" timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

STORE_PREFIX = "distdoctor_probe"
SIZES = (1 << 10, 1 << 16, 1 << 20)  # float32 elements: 4 KiB, 256 KiB, 4 MiB


@dataclass
class LaunchEnv:
    """What the launcher told this process (None where a variable is missing)."""

    rank: int | None
    local_rank: int | None
    world_size: int | None
    master_addr: str | None
    master_port: int | None
    launcher: str
    raw: dict[str, str] = field(default_factory=dict)


def _int(env: dict[str, str], name: str) -> int | None:
    value = env.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"probe: {name}={value!r} in the environment is not an integer")


def read_launch_env(env: dict[str, str] | None = None) -> LaunchEnv:
    """RANK / LOCAL_RANK / WORLD_SIZE / MASTER_* as a training script would read them."""
    env = dict(os.environ if env is None else env)
    if "TORCHELASTIC_RUN_ID" in env:
        launcher = "torchrun"
    elif "SLURM_PROCID" in env and "SLURM_STEP_ID" in env:
        launcher = "srun"
    elif "OMPI_COMM_WORLD_RANK" in env or "PMI_RANK" in env:
        launcher = "mpirun"
    elif "RANK" in env:
        launcher = "env"
    else:
        launcher = "none (plain python)"
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
            "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "CUDA_VISIBLE_DEVICES",
            "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
    return LaunchEnv(rank=_int(env, "RANK"), local_rank=_int(env, "LOCAL_RANK"),
                     world_size=_int(env, "WORLD_SIZE"), master_addr=env.get("MASTER_ADDR"),
                     master_port=_int(env, "MASTER_PORT"), launcher=launcher,
                     raw={k: env[k] for k in keys if k in env})


def pick_backend(requested: str) -> str:
    import torch

    if requested != "auto":
        return requested
    return "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > 0 else "gloo"


def bind_device(backend: str, local_rank: int | None) -> dict[str, Any]:
    """Bind the device a correct script would: cuda:LOCAL_RANK (0 when LOCAL_RANK is unset), else cpu."""
    import torch

    info: dict[str, Any] = {"device": "cpu", "device_index": None, "device_uuid": None,
                            "device_name": None, "visible_gpus": 0, "bind_error": None}
    if not torch.cuda.is_available():
        return info
    count = torch.cuda.device_count()
    info["visible_gpus"] = count
    index = local_rank if local_rank is not None else 0
    if index >= count:
        info["bind_error"] = f"LOCAL_RANK {index} but only {count} visible GPU(s)"
        return info
    torch.cuda.set_device(index)
    props = torch.cuda.get_device_properties(index)
    info.update(device=f"cuda:{index}", device_index=index, device_name=props.name,
                device_uuid=str(getattr(props, "uuid", "")) or f"index{index}")
    return info


def make_store(le: LaunchEnv, timeout: float):
    """The rendezvous store: a client of torchrun's agent store, or hosted by rank 0 otherwise."""
    import torch.distributed as dist

    use_agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    is_master = (le.rank == 0) and not use_agent
    store = dist.TCPStore(le.master_addr or "127.0.0.1", le.master_port or 29500,
                          world_size=le.world_size, is_master=is_master,
                          timeout=timedelta(seconds=timeout), wait_for_workers=False)
    return dist.PrefixStore(STORE_PREFIX + "/" + os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), store)


def wait_for_ranks(store, world_size: int, timeout: float) -> tuple[dict[int, dict], list[int]]:
    """Poll the store for every rank's check-in until all are in or the timeout passes."""
    deadline = time.monotonic() + timeout
    reports: dict[int, dict] = {}
    while True:
        for r in range(world_size):
            if r not in reports and store.check([f"rank/{r}"]):
                reports[r] = json.loads(store.get(f"rank/{r}").decode())
        missing = [r for r in range(world_size) if r not in reports]
        if not missing or time.monotonic() > deadline:
            return reports, missing
        time.sleep(0.05)


def node_identity() -> dict[str, Any]:
    """Host name, the address the host name resolves to (what gloo advertises without an interface
    variable) and the network namespace, so two namespaces on one machine count as two nodes."""
    host = socket.gethostname()
    try:
        addr = socket.gethostbyname(host)
    except OSError:
        addr = None
    try:
        netns = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        netns = None
    return {"host": host, "host_addr": addr, "netns": netns}


def node_key(rep: dict[str, Any]) -> str:
    return f"{rep['host']}[netns {rep['netns']}]" if rep.get("netns") else rep["host"]


def connection_problem(first_line: str, ranks: list[dict], backend: str) -> dict[str, str]:
    """Name why the backend could not connect ranks that did reach the store."""
    nodes = {node_key(r) for r in ranks}
    ifvar = "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"
    loop = [r["rank"] for r in ranks if (r.get("host_addr") or "").startswith("127.")]
    unset = [r["rank"] for r in ranks if ifvar not in r.get("env", {})]
    msg = f"ranks reached the rendezvous store but {backend} could not connect them: {first_line}"
    if len(nodes) > 1 and loop and unset:
        msg += (f". Rank(s) {', '.join(map(str, loop))} resolve their host name to a loopback address and have no "
                f"{ifvar}: they advertise 127.x to peers on other nodes. Set {ifvar}=<interface that reaches the "
                "other nodes> on every node")
    return {"cause": "rendezvous_unreachable", "message": msg}


def check_async_future(dist, torch, device: str, world: int) -> dict[str, Any]:
    """The optimizer-overlap case: reduce_scatter(..., async_op=True).get_future()."""
    try:
        inputs = [torch.ones(4, device=device) for _ in range(world)]
        out = torch.empty(4, device=device)
        work = dist.reduce_scatter(out, inputs, async_op=True)
        try:
            fut = work.get_future()
            fut.wait()
            return {"supported": True, "error": None}
        except RuntimeError as exc:
            work.wait()  # the collective itself ran; only the future is missing
            return {"supported": False, "error": str(exc).splitlines()[0]}
    except (RuntimeError, ValueError, NotImplementedError) as exc:
        return {"supported": False, "error": f"reduce_scatter: {str(exc).splitlines()[0]}"}


def time_all_reduce(dist, torch, device: str, iters: int = 3) -> list[dict[str, Any]]:
    rows = []
    for n in SIZES:
        t = torch.ones(n, device=device)
        dist.all_reduce(t)  # warm-up
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1000 / iters
        rows.append({"bytes": n * 4, "ms": round(ms, 3)})
    return rows


def analyse(reports: dict[int, dict], missing: list[int], world_size: int,
            expect_world_size: int | None, allreduce_ok: bool | None, allreduce_got: float | None,
            backend: str) -> dict[str, Any]:
    """Turn the ranks' reports into problems (each with a taxonomy cause id) and notes."""
    problems: list[dict[str, str]] = []
    notes: list[str] = []
    if expect_world_size is not None and world_size != expect_world_size:
        if world_size == 1:
            msg = (f"WORLD_SIZE is 1 but {expect_world_size} ranks were expected: the job runs as a single "
                   "process (started with plain python, or the launcher's --nproc_per_node/--ntasks is 1); "
                   f"{expect_world_size - 1} expected rank(s) do not exist")
            problems.append({"cause": "single_process_launch", "message": msg})
        else:
            problems.append({"cause": "launcher_args",
                             "message": f"WORLD_SIZE is {world_size} but {expect_world_size} ranks were expected"})
    for rep in reports.values():
        env = rep.get("env") or {}
        ntasks = env.get("SLURM_NTASKS", "1")
        if "RANK" not in env and ntasks.isdigit() and int(ntasks) > 1:
            problems.append({"cause": "slurm_launch",
                             "message": f"Slurm started {ntasks} tasks (SLURM_PROCID={env.get('SLURM_PROCID')}) but RANK/"
                                        "WORLD_SIZE/LOCAL_RANK are not set: every task runs alone as rank 0. Export "
                                        "RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS and "
                                        "MASTER_ADDR/MASTER_PORT (scripts/launch.py --profile slurm)"})
            break
    if missing:
        problems.append({"cause": "rendezvous_unreachable",
                         "message": f"rank(s) {', '.join(map(str, missing))} of {world_size} never checked in "
                                    "(not started, crashed before rendezvous, or cannot reach MASTER_ADDR:MASTER_PORT)"})
    by_node: dict[str, list[dict]] = {}
    for r, rep in sorted(reports.items()):
        by_node.setdefault(node_key(rep), []).append(rep)
        if rep.get("bind_error"):
            problems.append({"cause": "local_rank_device", "message": f"rank {r} on {rep['host']}: {rep['bind_error']}"})
    same_name = len(by_node) > len({rep["host"] for rep in reports.values()})
    by_host = {(key if same_name else reps[0]["host"]): reps for key, reps in by_node.items()}
    for host, reps in by_host.items():
        lrs = [rep["local_rank"] for rep in reps]
        unset = [rep["rank"] for rep in reps if rep["local_rank"] is None]
        if unset and len(reps) > 1:
            problems.append({"cause": "local_rank_device",
                             "message": f"ranks {', '.join(map(str, unset))} on {host} have no LOCAL_RANK: a script "
                                        "binding cuda:LOCAL_RANK puts them all on device 0 (only GPU 0 works)"})
        dup = sorted({lr for lr in lrs if lr is not None and lrs.count(lr) > 1})
        for lr in dup:
            ranks = [rep["rank"] for rep in reps if rep["local_rank"] == lr]
            problems.append({"cause": "local_rank_device",
                             "message": f"ranks {', '.join(map(str, ranks))} on {host} share LOCAL_RANK {lr}: a "
                                        f"script binding cuda:LOCAL_RANK puts them all on GPU {lr}"})
        devices: dict[str, list[int]] = {}
        for rep in reps:
            if rep.get("device_uuid"):
                devices.setdefault(rep["device_uuid"], []).append(rep["rank"])
        for uuid, ranks in devices.items():
            if len(ranks) > 1:
                dev = next(rep["device"] for rep in reps if rep.get("device_uuid") == uuid)
                problems.append({"cause": "local_rank_device",
                                 "message": f"ranks {', '.join(map(str, ranks))} on {host} share one GPU ({dev}, "
                                            f"{uuid}): several ranks on one device, the others idle"})
        if all(rep["device"] == "cpu" for rep in reps) and len(reps) > 1:
            notes.append(f"{host}: {len(reps)} ranks share the CPU (expected on CPU; on GPUs each rank needs its own)")
    if len(by_host) > 1:
        for host, reps in by_host.items():
            for rep in reps:
                ifvar = "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"
                if (rep.get("host_addr") or "").startswith("127.") and ifvar not in rep.get("env", {}):
                    notes.append(f"rank {rep['rank']} on {host}: host name resolves to {rep['host_addr']} and "
                                 f"{ifvar} is unset; multi-node traffic may be advertised on loopback")
    if allreduce_ok is False:
        expected = world_size * (world_size + 1) / 2
        problems.append({"cause": "fabric_fault",
                         "message": f"all_reduce returned {allreduce_got}, expected {expected}"})
    if backend == "nccl" and any(rep["device"] == "cpu" for rep in reports.values()):
        problems.append({"cause": "nccl_without_cuda", "message": "backend nccl but a rank has no CUDA device"})
    return {"ok": not problems, "problems": problems, "notes": notes}


def format_table(doc: dict[str, Any]) -> str:
    head = ["rank", "host", "pid", "local_rank", "world", "device", "backend"]
    rows = [head]
    multi_ns = len({r.get("netns") for r in doc["ranks"]}) > 1 and len({r["host"] for r in doc["ranks"]}) == 1
    for rep in doc["ranks"]:
        rows.append([str(rep["rank"]), node_key(rep) if multi_ns else rep["host"], str(rep["pid"]), str(rep["local_rank"]),
                     str(rep["world_size"]), rep["device"] + (f" {rep['device_name']}" if rep.get("device_name") else ""),
                     rep["backend"]])
    for r in doc["missing"]:
        rows.append([str(r), "MISSING", "-", "-", "-", "-", "-"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    out = [f"distdoctor probe: launcher={doc['launcher']} backend={doc['backend']} world_size={doc['world_size']}"
           + (f" expected={doc['expect_world_size']}" if doc.get("expect_world_size") else ""), *lines]
    if doc.get("all_reduce") is not None:
        ar = doc["all_reduce"]
        out.append(f"all_reduce sum: got {ar['got']} expected {ar['expected']} -> {'OK' if ar['ok'] else 'WRONG'}")
    if doc.get("async_future") is not None:
        af = doc["async_future"]
        out.append("async future (reduce_scatter async_op=True .get_future()): "
                   + ("supported" if af["supported"] else f"NOT supported ({af['error']})"))
    if doc.get("timings"):
        out.append("all_reduce time: " + ", ".join(f"{_size(t['bytes'])} {t['ms']:.3f} ms" for t in doc["timings"]))
    for note in doc["verdict"]["notes"]:
        out.append(f"note: {note}")
    if doc["verdict"]["ok"]:
        out.append(f"VERDICT: OK - all {doc['world_size']} rank(s) joined, device binding OK, all_reduce correct")
    else:
        out.append("VERDICT: PROBLEM")
        for p in doc["verdict"]["problems"]:
            out.append(f"  [{p['cause']}] {p['message']}")
    return "\n".join(out)


def _size(n: int) -> str:
    return f"{n // (1 << 20)} MiB" if n >= 1 << 20 else f"{n // 1024} KiB"


def run_probe(backend_req: str = "auto", timeout: float = 30.0, expect_world_size: int | None = None,
              as_json: bool = False, out=sys.stdout) -> int:
    """Run the probe on this rank. Exit code: 0 OK, 1 problem found, 2 usage error."""
    import torch
    import torch.distributed as dist

    le = read_launch_env()
    backend = pick_backend(backend_req)
    single = le.rank is None or le.world_size is None
    rank = 0 if single else le.rank
    world = 1 if single else le.world_size
    bound = bind_device(backend, le.local_rank)
    me = {"rank": rank, "local_rank": le.local_rank, "world_size": le.world_size, **node_identity(),
          "pid": os.getpid(), "backend": backend, "launcher": le.launcher, "torch": torch.__version__, **bound,
          "env": le.raw}
    sys.stderr.write(f"[probe R{rank}/{world}] host={me['host']} pid={me['pid']} RANK={le.rank} "
                     f"LOCAL_RANK={le.local_rank} WORLD_SIZE={le.world_size} device={me['device']} "
                     f"backend={backend}\n")
    sys.stderr.flush()

    doc: dict[str, Any] = {"launcher": le.launcher, "backend": backend, "world_size": world,
                           "expect_world_size": expect_world_size, "missing": [], "all_reduce": None,
                           "async_future": None, "timings": []}
    if backend == "nccl" and not (dist.is_nccl_available() and torch.cuda.is_available()):
        why = "this torch has no NCCL" if not dist.is_nccl_available() else "no CUDA device is visible"
        doc["ranks"] = [me]
        doc["verdict"] = {"ok": False, "notes": [], "problems": [{
            "cause": "nccl_without_cuda",
            "message": f"backend nccl requested but {why}; use gloo on CPU (--backend gloo / auto)"}]}
        return _emit(doc, as_json, out) if rank == 0 else 1
    if single:
        doc["ranks"] = [me]
        doc["verdict"] = analyse({0: me}, [], 1, expect_world_size, None, None, backend)
        return _emit(doc, as_json, out)

    try:
        store = make_store(le, timeout)
    except (RuntimeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0]
        print(f"[probe R{rank}/{world}] VERDICT: PROBLEM [rendezvous_unreachable] cannot reach the rendezvous "
              f"store at {le.master_addr}:{le.master_port}: {first}", file=out, flush=True)
        return 1
    store.set(f"rank/{rank}", json.dumps(me))
    if rank != 0:
        # Wait for rank 0's go/no-go so a missing rank does not leave the others in a hanging collective.
        try:
            store.wait(["go"], timedelta(seconds=timeout + 10))
        except Exception as exc:  # rank 0 died or never came: report and stop
            print(f"[probe R{rank}/{world}] rank 0 never gave the go signal: {str(exc).splitlines()[0]}",
                  file=sys.stderr, flush=True)
            return 1
        go = store.get("go").decode()
        if go != "yes":
            return 1
    else:
        reports, missing = wait_for_ranks(store, world, timeout)
        doc["missing"] = missing
        doc["ranks"] = [reports[r] for r in sorted(reports)]
        store.set("go", "no" if missing else "yes")
        if missing:
            doc["verdict"] = analyse(reports, missing, world, expect_world_size, None, None, backend)
            return _emit(doc, as_json, out)

    device = me["device"] if backend == "nccl" else "cpu"
    stop_watch = _start_failure_watch(le, rank, world, timeout, doc, expect_world_size, backend, as_json, out)
    try:
        dist.init_process_group(backend, store=dist.PrefixStore("pg", store), rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout))
        t = torch.full((4,), float(rank + 1), device=device)
        dist.all_reduce(t)
        got = float(t[0].item())
        expected = world * (world + 1) / 2
        af = check_async_future(dist, torch, device, world)
        timings = time_all_reduce(dist, torch, device)
        dist.barrier()
    except (RuntimeError, ValueError, OSError) as exc:  # DistBackendError / DistNetworkError are RuntimeErrors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"[probe R{rank}/{world}] {backend} connection failed: {first}", file=sys.stderr, flush=True)
        try:  # tell the others, which may be blocked waiting for this rank's connection
            store.set(f"fail/{rank}", first)
        except Exception:
            pass
        if rank != 0:
            return 1
        return _failure_verdict(doc, first, expect_world_size, backend, as_json, out)
    finally:
        stop_watch()
        if dist.is_initialized():
            dist.destroy_process_group()
    if rank != 0:
        return 0 if got == expected else 1
    store.set("done", "1")
    doc["all_reduce"] = {"got": got, "expected": expected, "ok": got == expected}
    doc["async_future"] = af
    doc["timings"] = timings
    doc["verdict"] = analyse({r["rank"]: r for r in doc["ranks"]}, [], world, expect_world_size,
                             got == expected, got, backend)
    return _emit(doc, as_json, out)


def _failure_verdict(doc: dict[str, Any], first: str, expect_world_size: int | None, backend: str,
                     as_json: bool, out) -> int:
    doc["verdict"] = analyse({r["rank"]: r for r in doc["ranks"]}, [], doc["world_size"], expect_world_size,
                             None, None, backend)
    doc["verdict"]["problems"].append(connection_problem(first, doc["ranks"], backend))
    doc["verdict"]["ok"] = False
    return _emit(doc, as_json, out)


def _start_failure_watch(le: LaunchEnv, rank: int, world: int, timeout: float, doc: dict[str, Any],
                         expect_world_size: int | None, backend: str, as_json: bool, out) -> Callable[[], None]:
    """A rank can sit in a backend connect that never ends while a peer already failed (gloo advertising
    127.0.0.1 to another node). A thread on its own store connection watches for the peers' `fail/<rank>`
    keys and for an overall deadline; rank 0 then prints the verdict, every rank ends its process.
    Returns the function that stops the thread and waits for it: a thread still inside a store call when
    rank 0's store server goes away at exit ends the process with std::terminate (SIGABRT)."""
    import threading

    import torch.distributed as dist

    def watch() -> None:
        try:
            raw = dist.TCPStore(le.master_addr or "127.0.0.1", le.master_port or 29500, is_master=False,
                                timeout=timedelta(seconds=timeout), wait_for_workers=False)
            store = dist.PrefixStore(STORE_PREFIX + "/" + os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"), raw)
        except Exception:
            return
        deadline = time.monotonic() + 3 * timeout + 10
        while time.monotonic() < deadline:
            if stopped.is_set() or store.check(["done"]):
                return
            for r in range(world):
                if r != rank and store.check([f"fail/{r}"]):
                    first = f"rank {r}: " + store.get(f"fail/{r}").decode(errors="replace")
                    print(f"[probe R{rank}/{world}] peer failed while this rank waits in the backend: {first}",
                          file=sys.stderr, flush=True)
                    if rank != 0:
                        os._exit(1)
                    os._exit(_failure_verdict(doc, first, expect_world_size, backend, as_json, out))
            stopped.wait(0.2)
        if stopped.is_set():
            return
        first = f"collectives did not finish within {3 * timeout + 10:g}s"
        print(f"[probe R{rank}/{world}] {first}", file=sys.stderr, flush=True)
        os._exit(1 if rank != 0 else _failure_verdict(doc, first, expect_world_size, backend, as_json, out))

    stopped = threading.Event()
    thread = threading.Thread(target=watch, name="probe-failure-watch", daemon=True)
    thread.start()

    def stop() -> None:
        stopped.set()
        thread.join(timeout=10)

    return stop


def _emit(doc: dict[str, Any], as_json: bool, out) -> int:
    if as_json:
        # one line, written at once, so other ranks' stderr cannot land inside it
        out.write(json.dumps(doc, default=str) + "\n")
        out.flush()
    else:
        out.write(format_table(doc) + "\n")
        out.flush()
    return 0 if doc["verdict"]["ok"] else 1


CLI_HELP = """Launch probe: start it with the job's own launcher; every rank checks in, rank 0 prints a table and a verdict.

  torchrun --standalone --nproc_per_node=2 scripts/probe.py [--json] [--expect-world-size N]
  srun --ntasks=2 --kill-on-bad-exit=1 bash -c 'RANK=$SLURM_PROCID ... python scripts/probe.py'

Exit codes: 0 launch looks right, 1 a problem was found (named in the verdict), 2 usage error.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=CLI_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="rank 0 prints the result as JSON instead of a table")
    ap.add_argument("--expect-world-size", type=int, metavar="N",
                    help="number of ranks the job should have; WORLD_SIZE 1 or another count is reported")
    ap.add_argument("--timeout", type=float, default=30.0, metavar="S",
                    help="seconds to wait for all ranks to join and for each collective (default 30)")
    ap.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                    help="auto: nccl when CUDA GPUs are visible, else gloo")
    args = ap.parse_args(argv)
    if args.expect_world_size is not None and args.expect_world_size < 1:
        ap.error("--expect-world-size must be at least 1")
    if args.timeout <= 0:
        ap.error("--timeout must be positive")
    return run_probe(args.backend, args.timeout, args.expect_world_size, args.json)
