#!/usr/bin/env python3
"""Benchmark the hang doctor.

1. Live: for 2, 4 and 8 ranks, evals/programs/hang_rank0_eval.py hangs for real under torchrun (gloo, CPU);
   once it is stuck, in the same run and alternating, time
     bare:    `py-spy dump --pid P` for every rank, all at once (the dumps hang.py needs), and
     hang.py: `scripts/hang.py --pid AGENT --json` from its start to its verdict (a new Python, imports, the
              dumps, the source reading, the report),
   and print the medians and their ratio (target: ≤ 3 s for 8 ranks and ≤ 1.5× the bare dumps).
2. Scale: the alignment over merged snapshots of 1,024 and 16,384 simulated ranks, built from the real
   snapshots in tests/data/hang/ (every rank a copy of a real rank, a few made odd, 8 ranks per host as
   `--collect` JSON), from JSON text to verdict; prints seconds and the 16,384 / 1,024 ratio (16 = linear;
   target ≤ 1 s and ≤ 10 s).

    python bench/bench_hang.py [--ranks 2 4 8] [--repeat 5] [--scale 1024 16384] [--skip-live]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from distdoctor.hang import jobs  # noqa: E402
from distdoctor.hang.align import analyse  # noqa: E402
from distdoctor.hang.frames import fill  # noqa: E402
from distdoctor.hang.live import find_py_spy  # noqa: E402
from distdoctor.hang.model import HostSnapshot, merge  # noqa: E402
from distdoctor.hang.programs import BY_NAME  # noqa: E402
from distdoctor.stacks import find_rank_processes  # noqa: E402

DATA = ROOT / "tests" / "data" / "hang"


def bare_dumps(py_spy: str, pids: list[int], parallel: bool = True) -> float:
    """`py-spy dump` of every rank: all at once, or one after another as scripts/dump_stacks.py does."""
    start = time.perf_counter()
    if parallel:
        procs = [subprocess.Popen([py_spy, "dump", "--pid", str(p)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for p in pids]
        for p in procs:
            p.wait(timeout=60)
    else:
        for p in pids:
            subprocess.run([py_spy, "dump", "--pid", str(p)], capture_output=True, timeout=60)
    return time.perf_counter() - start


def hang_py(agent: int, cache: str | None = None) -> tuple[float, dict]:
    """scripts/hang.py from its start to its verdict; with cache, a fresh source cache folder (a cold start)."""
    env = {**os.environ, **({"XDG_CACHE_HOME": cache} if cache else {})}
    start = time.perf_counter()
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "hang.py"), "--pid", str(agent), "--json"],
                         capture_output=True, text=True, timeout=120, env=env)
    return time.perf_counter() - start, json.loads(res.stdout)


def live(ranks: list[int], repeat: int) -> None:
    py_spy = find_py_spy()
    case = BY_NAME["hang_rank0_eval"]
    print("medians of", repeat, "alternating runs; bare = py-spy dump of every rank (parallel | one by one); "
          "hang.py cold = first run with an empty source cache (loads libcst)")
    print(f"{'ranks':>5}  {'bare par':>8}  {'bare seq':>8}  {'hang.py':>7}  {'cold':>5}  {'/par':>5}  {'/seq':>5}  verdict")
    for n in ranks:
        job = jobs.start(case.program, n)
        try:
            jobs.wait_stuck(job, 180)
            pids = [p.pid for p in find_rank_processes(job.pid)]
            with tempfile.TemporaryDirectory() as cache:
                cold, _ = hang_py(job.pid, cache)
            par, seq, full, out = [], [], [], {}
            for _ in range(repeat):
                par.append(bare_dumps(py_spy, pids))
                seq.append(bare_dumps(py_spy, pids, parallel=False))
                seconds, out = hang_py(job.pid)
                full.append(seconds)
        finally:
            job.kill()
        p, q, h = statistics.median(par), statistics.median(seq), statistics.median(full)
        ok = out.get("odd_ranks") == [0] and out["causes"][0]["id"] == case.cause
        print(f"{n:>5}  {p:>8.3f}  {q:>8.3f}  {h:>7.3f}  {cold:>5.2f}  {h / p:>5.2f}  {h / q:>5.2f}  odd "
              f"{out.get('odd_ranks')} {out['causes'][0]['id']} line {out['location']['line']} "
              f"{'ok' if ok else 'WRONG'}", flush=True)


def simulated(n: int, name: str = "hang_uneven_shards", odd_every: int = 4096, per_host: int = 8) -> list[str]:
    """Per-host `--collect` JSON texts of n ranks: copies of the real snapshot's majority rank, and a copy of its
    odd rank at rank 0 and every odd_every-th rank."""
    real = HostSnapshot.from_json(json.loads((DATA / f"{name}.json").read_text()))
    for r in real.ranks:
        for f in r.frames:
            f.file = f.file if f.file.startswith(("/", "<")) else str(ROOT / f.file)
        fill(r, r.frames)
    odd, normal = real.ranks[0].to_json(), real.ranks[1].to_json()
    hosts = []
    for h in range(0, n, per_host):
        ranks = []
        for g in range(h, min(h + per_host, n)):
            d = dict(odd if g % odd_every == 0 else normal)
            d.update(rank=g, local_rank=g - h, pid=10000 + g, host=f"node{h // per_host:05d}", world_size=n)
            ranks.append(d)
        hosts.append(json.dumps({"version": 1, "host": f"node{h // per_host:05d}", "ranks": ranks,
                                 "expected_ranks": list(range(h, min(h + per_host, n)))}))
    return hosts


def scale(sizes: list[int]) -> None:
    times = {}
    for n in sizes:
        texts = simulated(n)
        start = time.perf_counter()
        v = analyse(merge([HostSnapshot.from_json(json.loads(t)) for t in texts]))
        times[n] = time.perf_counter() - start
        expected = list(range(0, n, 4096))
        print(f"{n:>6} simulated ranks ({len(texts)} host snapshots): {times[n]:.3f} s to verdict; odd ranks "
              f"{v.odd_ranks} ({'ok' if v.odd_ranks == expected else 'WRONG'}), {v.causes[0].id}", flush=True)
    if len(sizes) > 1:
        a, b = sizes[0], sizes[-1]
        print(f"ratio {b}/{a} ranks: {times[b] / times[a]:.1f}x time for {b / a:.0f}x ranks")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scale", type=int, nargs="+", default=[1024, 16384])
    ap.add_argument("--skip-live", action="store_true")
    args = ap.parse_args()
    if not args.skip_live:
        live(args.ranks, args.repeat)
    scale(args.scale)


if __name__ == "__main__":
    main()
