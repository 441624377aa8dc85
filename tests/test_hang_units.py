"""The hang doctor's analysis on real snapshots (tests/data/hang/, taken from the hang programs by
make_snapshots.py), the Flight Recorder reader on real traces, merging, and bad input at the command line."""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distdoctor.hang import analyse, merge
from distdoctor.hang import flight_recorder as fr
from distdoctor.hang.frames import fill
from distdoctor.hang.model import HostSnapshot
from distdoctor.hang.programs import BY_NAME, CASES
from distdoctor.hang.source import (cleanup_clauses, debug_call, enclosing, exit_guards, in_function_of, locks_at,
                                    loop_exits, loop_test_sets, skipping_handlers, swallowing_handlers,
                                    unreleased_acquires, with_bodies)

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "hang"
HANG = [sys.executable, str(ROOT / "scripts" / "hang.py")]


def load(name: str) -> HostSnapshot:
    """A saved snapshot with its relative file paths made absolute, re-classified from its raw frames."""
    snap = HostSnapshot.from_json(json.loads((DATA / f"{name}.json").read_text()))
    for r in snap.ranks:
        for f in r.frames:
            if not f.file.startswith(("/", "<")):
                f.file = str(ROOT / f.file)
        fill(r, r.frames)
    return snap


def run_hang(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*HANG, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_saved_snapshot_names_odd_ranks_cause_and_line(case):
    v = analyse(load(case.name))
    assert v.odd_ranks == list(case.odd_ranks), v.summary
    assert v.causes[0].id == case.cause, [(c.id, c.evidence) for c in v.causes]
    assert v.causes[0].evidence and all(isinstance(e, str) for e in v.causes[0].evidence)
    assert Path(v.location["file"]).name == f"{case.name}.py" and v.location["line"] == case.line
    assert v.location["code"] == case.location


def test_snapshot_round_trips_through_json():
    snap = load("hang_uneven_shards")
    again = HostSnapshot.from_json(json.loads(json.dumps(snap.to_json())))
    assert again.to_json() == snap.to_json()


def test_merge_of_per_host_snapshots_gives_the_same_verdict(tmp_path):
    whole = load("hang_uneven_shards")
    parts = []
    for r in whole.ranks:  # every rank on a host of its own, as --collect on three nodes would give
        part = HostSnapshot(f"node{r.rank}", [r], [r.rank], {})
        r.host = part.host
        parts.append(part)
        (tmp_path / f"node{r.rank}.json").write_text(json.dumps(part.to_json()))
    merged = merge(parts)
    assert [r.rank for r in merged.ranks] == [0, 1, 2] and merged.expected_ranks == [0, 1, 2]
    assert analyse(merged).odd_ranks == [0]
    res = run_hang("--merge", *sorted(map(str, tmp_path.glob("*.json"))), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["odd_ranks"] == [0] and out["causes"][0]["id"] == "dataloader_uneven"
    assert out["hosts"] == ["node0", "node1", "node2"]
    assert {"ranks", "odd_ranks", "causes", "location"} <= out.keys()
    assert {"rank", "pid", "host", "op", "file", "line", "function"} <= out["ranks"][0].keys()


def test_merge_reads_one_snapshot_per_line(tmp_path):
    lines = [json.dumps(HostSnapshot(f"n{r.rank}", [r], [r.rank]).to_json()) for r in load("hang_rank0_eval").ranks]
    (tmp_path / "all.jsonl").write_text("\n".join(lines) + "\n")
    res = run_hang("--merge", str(tmp_path / "all.jsonl"))
    assert res.returncode == 0, res.stderr
    assert "CAUSE: rank_conditional_collective" in res.stdout and "LOCATION:" in res.stdout


def test_gone_rank_is_missing_from_the_merged_snapshot():
    snap = load("hang_uneven_shards")
    snap.ranks = [r for r in snap.ranks if r.rank != 2]  # rank 2's process is gone; its host still expects it
    v = analyse(snap)
    assert v.odd_ranks == [2] and v.causes[0].id == "peer_died_first"


def test_same_site_without_flight_recorder_is_no_divergence(tmp_path):
    snap = load("hang_fr_size_mismatch")
    snap.flight_recorder = {}
    v = analyse(snap)
    assert not v.causes and v.odd_ranks == [] and "TORCH_FR_BUFFER_SIZE" in v.summary
    (tmp_path / "s.json").write_text(json.dumps(snap.to_json()))
    res = run_hang("--merge", str(tmp_path / "s.json"), "--json")
    assert res.returncode == 1 and json.loads(res.stdout)["causes"] == []


def test_flight_recorder_traces_of_a_real_gloo_hang():
    traces = fr.read_dir(DATA / "hang_fr_size_mismatch.fr")
    assert sorted(traces) == ["0", "1", "2"]
    div = fr.first_divergence(traces)
    assert (div.seq, div.what, div.odd_ranks) == (3, "sizes", [0])
    assert div.by_rank[0]["input_sizes"] == [[2]] and div.by_rank[1]["input_sizes"] == [[1]]
    assert div.frame["file"].endswith("hang_fr_size_mismatch.py")


def test_fr_cli_reads_a_folder_of_traces():
    res = run_hang("--fr", str(DATA / "hang_fr_size_mismatch.fr"), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["odd_ranks"] == [0] and out["causes"][0]["id"] == "collective_shape_mismatch"
    assert out["location"]["line"] == BY_NAME["hang_fr_size_mismatch"].line
    assert out["flight_recorder"]["seq"] == 3


def test_flight_recorder_rank_that_never_got_there(tmp_path):
    traces = fr.read_dir(DATA / "hang_fr_size_mismatch.fr")
    traces["2"] = [e for e in traces["2"] if e["seq"] != 3]
    for entries in traces.values():  # the same sizes everywhere: only the missing entry differs
        for e in entries:
            e["input_sizes"] = [[1]]
    div = fr.first_divergence(traces)
    assert div.what == "missing" and div.odd_ranks == [2] and "never got there" in " ".join(div.evidence)


def test_trace_with_a_class_in_it_is_refused(tmp_path):
    (tmp_path / "trace_0").write_bytes(pickle.dumps({"entries": [], "x": Path("/")}))
    with pytest.raises(fr.TraceError, match="not a Flight Recorder trace"):
        fr.read_trace(tmp_path / "trace_0")
    res = run_hang("--fr", str(tmp_path))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "trace_0" in res.stderr


def test_source_reading_finds_rank_guards_and_loops():
    case = BY_NAME["hang_checkpoint_rank0"]
    blocks = enclosing(str(case.program), case.line + 1)
    assert [(b.kind, b.header, b.on_rank) for b in blocks][-2:] == [
        ("for", "for step in range(2):", False), ("if", "if is_main_process():", True)]
    assert enclosing(str(ROOT / "no" / "such.py"), 3) == ()


def test_source_reading_finds_early_exits_on_the_rank_and_debugger_stops(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("def report(x, rank, step):\n"        # 1
                   "    if step == 0:\n"                   # 2  exits, but not on the rank
                   "        return\n"
                   "    if rank != 0:\n"                   # 4  the guard
                   "        return\n"
                   "    if rank == 0:\n"                   # 6  encloses the line: no early exit
                   "        import pdb; pdb.set_trace()\n"  # 7
                   "        dist.all_reduce(x)\n"          # 8
                   "\n"
                   "def main(rank):\n"                     # 10
                   "    dist.barrier()\n")                 # 11
    assert [(b.line, b.header) for b in exit_guards(str(src), 8)] == [(4, "if rank != 0:")]
    assert exit_guards(str(src), 11) == ()  # another function's guards do not count
    assert (debug_call(str(src), 8).line, debug_call(str(src), 8).header) == (7, "pdb.set_trace()")
    assert debug_call(str(src), 11) is None
    assert all(b.kind != "debug" for b in enclosing(str(src), 7))


def test_source_reading_finds_skipping_handlers_polling_loops_and_own_guards(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("def load(rank):\n"                      # 1
                   "    if rank == 1:\n"                    # 2  exits, in load: not main's guard
                   "        raise ValueError('bad')\n"
                   "def main(rank, it):\n"                  # 4
                   "    for step in range(9):\n"            # 5
                   "        try:\n"
                   "            x = load(rank)\n"
                   "        except ValueError as exc:\n"    # 8  skips the rest of the pass
                   "            continue\n"
                   "        except KeyError:\n"             # 10 does not exit
                   "            x = None\n"
                   "        for y in it:\n"                 # 12
                   "            try:\n"
                   "                pass\n"
                   "            except OSError:\n"          # 15 continues the inner loop only
                   "                continue\n"
                   "        dist.all_reduce(x)\n"           # 17
                   "    while not ready():\n"               # 18
                   "        time.sleep(1)\n"
                   "    while True:\n"                      # 20
                   "        break\n"
                   "main(0, [])\n")                         # 22
    assert [(b.line, b.header) for b in skipping_handlers(str(src), 5)] == [(8, "except ValueError as exc:")]
    assert skipping_handlers(str(src), 5, before=8) == ()
    assert skipping_handlers(str(src), 18) == () and skipping_handlers(str(src), 99) == ()
    assert [(b.kind, b.line, b.forever) for b in enclosing(str(src), 19)][-1] == ("while", 18, False)
    assert [(b.kind, b.line, b.forever) for b in enclosing(str(src), 21)][-1] == ("while", 20, True)
    assert all(b.kind != "except" for b in enclosing(str(src), 9))
    assert exit_guards(str(src), 22) == ()  # a module-level frame does not see the ifs inside functions


def test_source_reading_finds_exits_on_data_and_handlers_that_swallow(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("def step(batch):\n"                     # 1
                   "    if batch.numel() == 0:\n"           # 2  an exit on data
                   "        return\n"
                   "    try:\n"
                   "        dist.all_reduce(batch)\n"       # 5
                   "    except RuntimeError as exc:\n"      # 6  goes on
                   "        print(exc)\n"
                   "    except KeyError:\n"                 # 8  re-raises: no skip
                   "        raise\n"
                   "    dist.barrier()\n"                   # 10
                   "def main():\n"                          # 11
                   "    step(x)\n")                         # 12
    assert exit_guards(str(src), 5) == ()  # not on the rank
    assert [(b.line, b.on_rank) for b in exit_guards(str(src), 5, any_test=True)] == [(2, False)]
    assert [(b.line, b.header) for b in swallowing_handlers(str(src), 5)] == [(6, "except RuntimeError as exc:")]
    assert swallowing_handlers(str(src), 10) == ()
    assert in_function_of(str(src), 5, 10) and not in_function_of(str(src), 5, 12)


def test_source_reading_finds_loop_exit_tests_and_with_bodies(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("def main(rank):\n"                      # 1
                   "    for step in range(9):\n"            # 2
                   "        if step >= limit:\n"            # 3  breaks the loop: a per-rank stop test
                   "            break\n"
                   "        for y in it:\n"                 # 5
                   "            if y is None:\n"            # 6  breaks the inner loop only
                   "                break\n"
                   "        if step == 2:\n"                # 8  does not exit
                   "            log(step)\n"
                   "    with main_first(rank):\n"           # 10
                   "        data = build(rank)\n"           # 11
                   "    def inner():\n"                     # 12
                   "        return 1\n")
    assert [(b.line, b.header) for b in loop_exits(str(src), 2)] == [(3, "if step >= limit:")]
    assert [b.line for b in loop_exits(str(src), 5)] == [6] and loop_exits(str(src), 99) == ()
    assert [(b.kind, b.line, b.header) for b in with_bodies(str(src), 11)] == [("with", 10, "with main_first(rank):")]
    assert with_bodies(str(src), 10) == () and with_bodies(str(src), 13) == ()  # its header; a nested def
    assert all(b.kind != "with" for b in enclosing(str(src), 11))  # with blocks stay out of the branch rules


def test_source_reading_finds_cleanup_clauses_loop_tests_locks_and_consoles(tmp_path):
    src = tmp_path / "train.py"
    src.write_text("import code\n"                              # 1
                   "def main(rank):\n"                          # 2
                   "    try:\n"                                 # 3
                   "        train(rank)\n"                      # 4
                   "    finally:\n"                             # 5  a clean-up clause
                   "        barrier()\n"                        # 6
                   "    done = False\n"                         # 7
                   "    while not done:\n"                      # 8
                   "        x, done = step(), check()\n"        # 9  binds what the test reads
                   "        y = x + 1\n"                        # 10
                   "    while True:\n"                          # 11
                   "        done = True\n"                      # 12 a constant test: no per-rank value
                   "    code.interact(local=locals())\n"        # 13 an interactive console
                   "def work(lock, path):\n"                   # 14
                   "    lock.acquire()\n"                       # 15 released in no finally
                   "    read(path)\n"
                   "    lock.release()\n"
                   "def safe(lock):\n"                         # 18
                   "    lock.acquire()\n"                       # 19 released in a finally
                   "    try:\n"
                   "        read(1)\n"                          # 21
                   "    except StopIteration:\n"                # 22 the end of the data
                   "        pass\n"
                   "    finally:\n"
                   "        lock.release()\n"
                   "def loop(lock):\n"                         # 26
                   "    with lock:\n"                           # 27
                   "        pass\n")
    assert [(b.kind, b.line, b.header, tried) for b, tried in cleanup_clauses(str(src), 6)] == \
        [("finally", 5, "finally:", (4, 4))]
    assert cleanup_clauses(str(src), 4) == () and cleanup_clauses(str(src), 9) == ()
    assert [(b.line, b.header) for b in loop_test_sets(str(src), 8)] == [(9, "x, done = step(), check()")]
    assert loop_test_sets(str(src), 11) == () and loop_test_sets(str(src), 99) == ()
    assert debug_call(str(src), 13).line == 13
    assert locks_at(str(src), 27) == ("lock",) and locks_at(str(src), 15) == ("lock",) and locks_at(str(src), 16) == ()
    assert [b.line for b in unreleased_acquires(str(src), "lock")] == [15]
    assert [b.line for b in swallowing_handlers(str(src), 21)] == [22]
    assert swallowing_handlers(str(src), 21, ignore=("StopIteration",)) == ()
    assert all(b.kind in ("if", "for", "while", "def") for b in enclosing(str(src), 6))


def test_user_code_called_back_inside_a_collective_is_user_code():
    from distdoctor.hang.frames import called_back
    from distdoctor.hang.model import Frame, RankSnapshot

    c10d = f"{TORCH}/distributed/distributed_c10d.py"
    frames = [Frame("/home/u/train.py", 18, "Results.__getstate__"), Frame(c10d, 10, "_object_to_tensor"),
              Frame(c10d, 20, "all_gather_object"), Frame(f"{TORCH}/distributed/c10d_logger.py", 5, "wrapper"),
              Frame("/home/u/train.py", 30, "main")]
    assert called_back(frames) == "all_gather_object"
    snap = fill(RankSnapshot(1, 1, "h"), frames)
    assert (snap.state, snap.op, snap.line) == ("user code", None, 18)
    assert called_back(frames[1:]) is None


@pytest.mark.parametrize("args, words", [
    (["--pid", "4194000"], "no process 4194000"),
    (["--merge", "/no/such.json"], "cannot read"),
    (["--fr", "/no/such/folder"], "not a folder"),
])
def test_bad_input_is_one_line_and_exit_2(args, words):
    res = run_hang(*args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and words in res.stderr and res.stdout == ""


def test_pid_that_is_no_rank():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        res = run_hang("--pid", str(sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert res.returncode == 2 and f"pid {sleeper.pid} is no rank process" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_py_spy_missing_says_how_to_get_it():
    fake_rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                 env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"})
    try:
        res = run_hang("--pid", str(fake_rank.pid), "--py-spy", "no-such-py-spy")
    finally:
        fake_rank.kill()
        fake_rank.wait()
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "pip install py-spy" in res.stderr and "ptrace" in res.stderr


def test_help():
    res = run_hang("--help")
    assert res.returncode == 0 and "--collect" in res.stdout and "--merge" in res.stdout and "--fr" in res.stdout


def test_hung_py_spy_is_bounded_and_the_rank_kept(tmp_path):
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\nsleep 30\n")
    fake.chmod(0o755)
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                            env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"})
    try:
        res = run_hang("--pid", str(rank.pid), "--py-spy", str(fake), "--timeout", "1", "--json")
    finally:
        rank.kill()
        rank.wait()
    assert res.returncode == 1, res.stderr  # no verdict from no stack, but the report comes
    out = json.loads(res.stdout)
    assert [r["pid"] for r in out["ranks"]] == [rank.pid]
    assert "did not answer in 1s" in out["errors"][0]


def test_ranks_of_two_jobs_need_a_pid():
    fakes = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              env={**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_PORT": str(port)})
             for port in (29991, 29992)]
    try:
        res = run_hang()  # no --pid: every rank here, but they belong to two jobs
    finally:
        for f in fakes:
            f.kill()
            f.wait()
    assert res.returncode == 2 and "choose one with --pid" in res.stderr, res.stderr


SIGNAL_RANK = """
import os, sys, time, torch, torch.distributed as dist
sys.path.insert(0, sys.argv[1])
import distdoctor.tracer as T
dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
assert T.dump_flight_recorder_on_signal()
dist.all_reduce(torch.ones(5))
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.torchrun
def test_flight_recorder_dump_on_signal(tmp_path):
    """Opt-in: `kill -USR2` makes a rank write its Flight Recorder trace while its main thread is busy."""
    prefix = str(tmp_path / "trace_")
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": "100", "TORCH_FR_DUMP_TEMP_FILE": prefix, "RANK": "0",
           "OMP_NUM_THREADS": "1"}
    rank = subprocess.Popen([sys.executable, "-c", SIGNAL_RANK, str(ROOT)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert rank.stdout.readline().strip() == "ready"
        os.kill(rank.pid, signal.SIGUSR2)
        trace, size = Path(prefix + "0"), -1
        for _ in range(300):  # under load (2 cores, other jobs) the dump can take seconds to appear and finish
            if trace.exists() and trace.stat().st_size == size > 0:
                break
            size = trace.stat().st_size if trace.exists() else -1
            time.sleep(0.1)
        entries = fr.compact(fr.read_trace(trace))
    finally:
        rank.kill()
        rank.communicate()
    assert [(e["op"], e["input_sizes"]) for e in entries] == [("all_reduce", [[5]])]


def test_pid_of_one_rank_does_not_count_its_siblings_as_gone():
    """--pid of a rank (not its launcher) looks at that rank alone: the others are not 'exited'."""
    env = {**os.environ, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        time.sleep(0.3)
        res = run_hang("--pid", str(rank.pid), "--json")
    finally:
        rank.kill()
        rank.wait()
    out = json.loads(res.stdout)
    assert res.returncode == 1 and out["odd_ranks"] == [] and [r["rank"] for r in out["ranks"]] == [0]
    assert out["ranks"][0]["state"] == "user code"


def test_eval_scoring_needs_odd_rank_cause_and_line():
    from distdoctor.evals.hang_cases import score
    from distdoctor.hang.report import to_json

    case = BY_NAME["hang_uneven_shards"]
    snap = load(case.name)
    out = to_json(snap, analyse(snap))
    assert score(case, out)[0]
    for key, wrong in (("odd_ranks", [1]), ("causes", [{"id": "rank_conditional_collective"}]),
                       ("location", {**out["location"], "line": case.line + 1})):
        ok, detail = score(case, {**out, key: wrong})
        assert not ok and "wrong" in detail


TORCH = "/venv/lib/python3.11/site-packages/torch"


@pytest.mark.parametrize("inner, state, op", [
    ([(f"{TORCH}/distributed/distributed_c10d.py", "send")], "p2p", "send"),
    ([(f"{TORCH}/distributed/distributed_c10d.py", "monitored_barrier")], "barrier", "monitored_barrier"),
    ([(f"{TORCH}/distributed/distributed_c10d.py", "all_gather"),
      (f"{TORCH}/distributed/c10d_logger.py", "wrapper"),
      (f"{TORCH}/distributed/distributed_c10d.py", "all_gather_object")], "collective", "all_gather_object"),
    ([(f"{TORCH}/autograd/__init__.py", "backward"), (f"{TORCH}/_tensor.py", "Tensor.backward")],
     "collective", "backward"),
    ([(f"{TORCH}/utils/data/dataloader.py", "_MultiProcessingDataLoaderIter._next_data")], "data loading", None),
    ([(f"{TORCH}/distributed/distributed_c10d.py", "init_process_group")], "init", "init_process_group"),
    ([("/usr/lib/python3.11/threading.py", "Event.wait")], "user code", None),
])
def test_state_and_op_from_a_stack(inner, state, op):
    from distdoctor.hang.model import Frame, RankSnapshot

    frames = [Frame(f, 10, fn) for f, fn in inner] + [Frame("/home/u/train.py", 42, "main")]
    snap = fill(RankSnapshot(0, 1, "h"), frames)
    assert (snap.state, snap.op) == (state, op)
    assert (snap.file, snap.line, snap.function) == ("/home/u/train.py", 42, "main")


def test_report_names_the_checker_finding_on_the_diverging_line():
    """The hang doctor points to the static checker's finding (DD101) on the lines that sent rank 0 away."""
    from distdoctor.hang.cli import checker_findings
    from distdoctor.hang.report import render, to_json

    snap = load("hang_rank0_eval")
    v = analyse(snap)
    v.checker = checker_findings(snap, v)
    assert [(f["code"], f["cause"]) for f in v.checker] == [("DD101", "rank_conditional_collective")]
    assert Path(v.checker[0]["path"]).name == "hang_rank0_eval.py"
    assert abs(v.checker[0]["line"] - v.location["line"]) <= 1
    assert to_json(snap, v)["checker"] == v.checker
    assert "CHECKER: " in render(snap, v) and "DD101" in render(snap, v)


def test_no_checker_finding_on_library_frames_only():
    from distdoctor.check.link import findings_near, is_user_file

    assert not is_user_file(fr.__file__.replace("distdoctor/hang", "nonexistent"))
    import torch.distributed as torch_dist

    assert not is_user_file(torch_dist.__file__)
    assert findings_near([(torch_dist.__file__, 1)]) == []
