"""A job stuck in its start-up: every rank in init_process_group. The phase comes from the stack, and the arguments
py-spy shows in the init_process_group frame (world_size, rank, init_method) against the launcher's WORLD_SIZE say
why (the live versions are hang_init_world_size and hang_init_address in tests/test_hang_live.py)."""
from __future__ import annotations

from distdoctor.hang import init_wait
from distdoctor.hang.align import analyse
from distdoctor.hang.model import HostSnapshot, Frame, RankSnapshot

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
RDZV = "/venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py"


def _rank(rank: int, inner: str, init: dict | None = None, world: int = 2) -> RankSnapshot:
    frames = [Frame(RDZV if inner.startswith("_create") else C10D, 10, inner),
              Frame(C10D, 1899, "init_process_group"), Frame("/job/train.py", 7, "main")]
    return RankSnapshot(rank, 100 + rank, "node0", rank, world, "init", "init_process_group", "/job/train.py", 7,
                        "main", frames=frames, init=init)


def test_a_world_size_larger_than_the_launchers_names_the_ranks_that_never_come() -> None:
    ranks = [_rank(r, "_new_process_group_helper", {"world_size": 4, "rank": r, "init_method": "env://"})
             for r in range(2)]
    v = analyse(HostSnapshot("node0", ranks, [0, 1]))
    assert v.causes[0].id == "store_barrier_world_size" and v.causes[0].score >= 0.85
    assert v.odd_ranks == [2, 3]
    assert any("world_size=4" in e and "started 2" in e for e in v.causes[0].evidence)
    assert (v.location["file"], v.location["line"]) == ("/job/train.py", 7)


def test_two_processes_passing_the_same_rank_leave_one_rank_unfilled() -> None:
    ranks = [_rank(r, "_new_process_group_helper", {"world_size": 2, "rank": 0}) for r in range(2)]
    v = analyse(HostSnapshot("node0", ranks, [0, 1]))
    assert v.causes[0].id == "store_barrier_world_size"
    assert any("same rank" in e for e in v.causes[0].evidence)


def test_different_rendezvous_addresses_are_unreachable_rendezvous() -> None:
    ranks = [_rank(r, "_create_c10d_store", {"world_size": 2, "rank": r, "init_method": f"tcp://10.0.0.1:{2950 + r}"})
             for r in range(2)]
    v = analyse(HostSnapshot("node0", ranks, [0, 1]))
    assert v.causes[0].id == "rendezvous_unreachable" and v.causes[0].score >= 0.85
    assert any("tcp://10.0.0.1:2950, tcp://10.0.0.1:2951" in e for e in v.causes[0].evidence)


def test_without_arguments_the_phase_gives_candidates_and_ranks_elsewhere_are_named() -> None:
    """One node of a 4-rank job, its ranks waiting at the store: the other node's ranks may not have started or
    cannot reach it; nothing here says which, so no answer is sure."""
    ranks = [_rank(r, "_create_c10d_store", world=4) for r in range(2)]
    v = analyse(HostSnapshot("node0", ranks, [0, 1]))
    assert [c.id for c in v.causes] == ["rendezvous_unreachable", "rank_start_skew"]
    assert all(c.score < 0.85 for c in v.causes) and v.odd_ranks == [2, 3]
    assert any("not on the host(s) examined" in e for e in v.causes[0].evidence)
    barrier = analyse(HostSnapshot("node0", [_rank(r, "_store_based_barrier") for r in range(2)], [0, 1]))
    assert barrier.causes[0].id == "store_barrier_world_size" and not barrier.odd_ranks


def test_init_args_keeps_only_the_three_arguments() -> None:
    frames = [{"name": "_new_process_group_helper", "locals": [{"name": "group_size", "repr": "3"}]},
              {"name": "init_process_group", "locals": [
                  {"name": "backend", "repr": '"gloo"'}, {"name": "init_method", "repr": '"env://"'},
                  {"name": "world_size", "repr": "3"}, {"name": "rank", "repr": "-1"},
                  {"name": "store", "repr": "<PrefixStore at 0x7f>"}]}]
    assert init_wait.init_args(frames) == {"world_size": 3, "init_method": "env://"}  # rank -1: not passed
    assert init_wait.init_args([{"name": "main", "locals": []}]) is None
    assert init_wait.init_args([{"name": "init_process_group", "locals": [{"name": "world_size", "repr": "n"}]}]) \
        is None


def test_a_snapshot_keeps_its_init_arguments_through_json() -> None:
    r = _rank(0, "_new_process_group_helper", {"world_size": 3, "rank": 0})
    assert RankSnapshot.from_json(r.to_json()).init == {"world_size": 3, "rank": 0}


def test_a_process_blocked_on_input_is_seen_reading_its_stdin() -> None:
    """A real process waiting in input() with an open pipe on stdin; the same process sleeping is not reading."""
    import subprocess
    import sys
    import time

    from distdoctor.procs import reading_input

    asking = subprocess.Popen([sys.executable, "-c", "input('Overwrite? [y/N] ')"], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL)
    sleeping = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while reading_input(asking.pid) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (reading_input(asking.pid) or "").startswith("pipe:")
        assert reading_input(sleeping.pid) is None
    finally:
        for p in (asking, sleeping):
            p.kill()
            p.wait()


def test_a_question_before_init_holds_the_ranks_in_init() -> None:
    asking = RankSnapshot(0, 100, "node0", 0, 2, "user code", None, "/job/train.py", 5, "main",
                          frames=[Frame("/job/train.py", 5, "main")], path=[Frame("/job/train.py", 5, "main")],
                          reads_input="/dev/pts/3")
    waiting = _rank(1, "_new_process_group_helper")
    v = analyse(HostSnapshot("node0", [asking, waiting], [0, 1]))
    assert v.causes[0].id == "prompt_on_one_rank" and v.odd_ranks == [0]
    assert any("reading the terminal (/dev/pts/3)" in e for e in v.causes[0].evidence)
    assert (v.location["file"], v.location["line"]) == ("/job/train.py", 5)


def test_a_process_waiting_for_a_file_lock_names_the_holder(tmp_path) -> None:
    """Two real processes: one holds an flock on a file, the other waits for it; /proc/locks names the holder."""
    import subprocess
    import sys
    import time

    from distdoctor.procs import waiting_lock

    path = tmp_path / "cache.lock"
    take = "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); print(1, flush=True); " \
           "time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", take, str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "1"
    waiter = subprocess.Popen([sys.executable, "-c", take, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while waiting_lock(waiter.pid) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert waiting_lock(waiter.pid) == {"path": str(path), "holder": holder.pid}
        assert waiting_lock(holder.pid) is None  # it holds the lock and sleeps
    finally:
        for p in (holder, waiter):
            p.kill()
            p.wait()


def test_a_process_waiting_on_a_lock_another_thread_holds_sleeps_in_futex() -> None:
    import subprocess
    import sys
    import time

    from distdoctor.procs import waiting_futex

    held = ("import threading, time\nlock = threading.Lock()\nlock.acquire()\n"
            "threading.Thread(target=lambda: time.sleep(60), daemon=True).start()\nprint(1, flush=True)\nlock.acquire()\n")
    waiter = subprocess.Popen([sys.executable, "-c", held], stdout=subprocess.PIPE, text=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); time.sleep(60)"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert waiter.stdout.readline().strip() == "1" and sleeper.stdout.readline().strip() == "1"
        deadline = time.monotonic() + 20
        while not waiting_futex(waiter.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert waiting_futex(waiter.pid)
        assert not waiting_futex(sleeper.pid)
    finally:
        for p in (waiter, sleeper):
            p.kill()
            p.wait()


def test_a_straggler_on_a_lock_names_its_other_threads() -> None:
    waiting = RankSnapshot(0, 100, "node0", 0, 2, "collective", "all_reduce", "/job/train.py", 30, "main")
    late = RankSnapshot(1, 101, "node0", 1, 2, "user code", None, "/job/train.py", 32, "main",
                        waits_futex=True, threads=[{"name": "flusher", "file": "/job/train.py", "line": 19,
                                                    "function": "flusher"}])
    v = analyse(HostSnapshot("node0", [waiting, late], [0, 1]))
    assert v.causes[0].id == "collective_timeout" and v.odd_ranks == [1]
    ev = " | ".join(v.causes[0].evidence)
    assert "sleeps in futex" in ev and "its thread flusher is at /job/train.py:19 in flusher" in ev


def test_a_pipe_nobody_else_holds_has_no_writer() -> None:
    """A process reading a pipe whose write end only it holds (its producer gone) vs one whose writer lives."""
    import subprocess
    import sys
    import time

    from distdoctor.procs import reading_pipe

    alone = "import os\nr, w = os.pipe()\nprint(1, flush=True)\nos.read(r, 1)\n"
    fed = ("import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n    time.sleep(60)\n    os._exit(0)\n"
           "os.close(w)\nprint(1, flush=True)\nos.read(r, 1)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for code in (alone, fed)]
    try:
        assert all(p.stdout.readline().strip() == "1" for p in procs)
        deadline = time.monotonic() + 20
        while any(reading_pipe(p.pid) is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        lone, feeding = (reading_pipe(p.pid) for p in procs)
        assert lone["pipe"].startswith("pipe:") and lone["writers"] == []
        assert len(feeding["writers"]) == 1  # the forked child keeps the write end
    finally:
        from distdoctor.procs import kill_tree
        for p in procs:
            kill_tree(p.pid)
            p.wait()


def test_a_straggler_reading_a_pipe_with_no_writer_is_told_its_producer_is_gone() -> None:
    waiting = RankSnapshot(0, 100, "node0", 0, 2, "barrier", "barrier", "/job/train.py", 11, "main")
    late = RankSnapshot(1, 101, "node0", 1, 2, "user code", None, "/job/train.py", 10, "main",
                        reads_pipe={"pipe": "pipe:[42]", "writers": []})
    v = analyse(HostSnapshot("node0", [waiting, late], [0, 1]))
    assert v.odd_ranks == [1] and any("no other process holds open" in e for e in v.causes[0].evidence)
    late.reads_pipe = {"pipe": "pipe:[42]", "writers": [102]}  # its worker is alive: nothing to say about it
    v = analyse(HostSnapshot("node0", [waiting, late], [0, 1]))
    assert not any("no other process holds open" in e for e in v.causes[0].evidence)
