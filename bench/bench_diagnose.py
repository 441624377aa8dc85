#!/usr/bin/env python3
"""Benchmark: diagnose a generated multi-GB-class log against `grep -E -f` with the same signatures.

Generates LOG (default 1 GB) of 64 interleaved ranks (`[rankN]:` prefixes, glog-style INFO lines,
training metrics, NCCL INFO noise) with one real failure buried at 70 %: the rank-1 traceback and
rank-0 echo of tests/data/logs/gen_peer_died_valueerror.log (produced here by torch 2.13 on gloo),
renumbered to ranks 37 and 5. Then times, in the same run and on the same warm file:
  grep -E -c -f PATTERNS LOG     (the knowledge base's signature regexes, translated to ERE)
  scripts/diagnose.py LOG --json
and prints MB/s for both, the ratio, and each one's peak RSS (wait4 rusage of that process).

    python bench/bench_diagnose.py [--size-mb 1024] [--log /tmp/distdoctor-bench.log] [--keep] [--repo PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from distdoctor.knowledge import load_entries  # noqa: E402

FAILURE_LOG = ROOT / "tests" / "data" / "logs" / "gen_peer_died_valueerror.log"
BAD_RANK, ECHO_RANK = 37, 5


def _noise_lines(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        r = rng.randrange(64)
        kind = rng.random()
        ts = f"I1123 07:{(i // 3600) % 60:02d}:{(i // 60) % 60:02d}.{rng.randrange(10**6):06d} {20000 + r}"
        if kind < 0.6:
            out.append(f"[rank{r}]:{ts} train.py:214] step {i} loss {rng.random() * 4:.4f} lr 3.0e-04 "
                       f"grad_norm {rng.random():.3f} tokens/s {rng.randrange(80000, 120000)} mfu 41.{rng.randrange(99)}%\n")
        elif kind < 0.8:
            out.append(f"[rank{r}]:{ts} dataloader.py:88] prefetch queue {rng.randrange(8)}/8, shard "
                       f"{rng.randrange(1024):04d} offset {rng.randrange(10**9)}\n")
        elif kind < 0.95:
            out.append(f"node{r // 8:02d}:{30000 + r}:{31000 + r} [{r % 8}] NCCL INFO Channel {rng.randrange(32):02d}/0 : "
                       f"{r} -> {(r + 1) % 64} via P2P/IPC/read\n")
        else:
            out.append(f"[rank{r}]:{ts} checkpoint.py:51] saved shard {rng.randrange(64)} of step {i} "
                       f"in {rng.random() * 3:.2f}s\n")
    return out


def _failure_block() -> str:
    text = FAILURE_LOG.read_text(encoding="utf-8")
    lines = [ln for ln in text.splitlines(keepends=True) if ln.startswith("[rank")]
    return "".join(ln.replace("[rank1]:", f"[rank{BAD_RANK}]:").replace("[rank0]:", f"[rank{ECHO_RANK}]:")
                   for ln in lines)


def generate(path: Path, size: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    pool = "".join(_noise_lines(rng, 40000)).encode()
    failure = _failure_block().encode()
    written, inserted = 0, False
    with open(path, "wb") as f:
        while written < size:
            if not inserted and written >= size * 0.7:
                f.write(failure)
                written += len(failure)
                inserted = True
            chunk = pool if written + len(pool) <= size else pool[:pool.rfind(b"\n", 0, size - written) + 1]
            if not chunk:
                break
            f.write(chunk)
            written += len(chunk)


def ere(regex: str) -> str | None:
    """A Python signature regex as a POSIX ERE for grep -E (None if it cannot be translated)."""
    if "(?" in regex.replace("(?:", ""):
        return None
    return regex.replace("(?:", "(").replace(r"\d", "[0-9]")


def timed(cmd: list[str]) -> tuple[float, int, int, bytes, float]:
    """(seconds, peak RSS in KiB, exit status, stdout, CPU seconds) of one process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, usage.ru_maxrss, proc.returncode, out, usage.ru_utime + usage.ru_stime


def _repo_run(log: Path, refs: Path, mb: float, repo: str) -> dict:
    """Seconds, MB/s and peak RSS of `diagnose LOG --repo REPO`, after a run on a one-line log caches the checker's
    answer (the log's reading, not the checker, is what is timed)."""
    base = [sys.executable, str(ROOT / "scripts" / "diagnose.py"), "--json", "--quiet", "--references", str(refs),
            "--repo", repo]
    with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
        f.write("RuntimeError: warm-up\n")
    subprocess.run(base + [f.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.unlink(f.name)
    s, rss, _, out, cpu = timed(base + [str(log)])
    return {"seconds": round(s, 2), "cpu_seconds": round(cpu, 2), "mb_per_s": round(mb / s, 1),
            "peak_rss_mb": round(rss / 1024, 1), "rule": (json.loads(out).get("code") or {}).get("rule")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--log", default=str(Path(tempfile.gettempdir()) / "distdoctor-bench.log"))
    ap.add_argument("--keep", action="store_true", help="keep the generated log")
    ap.add_argument("--references", help="knowledge base folder whose signatures both sides use (default references/)")
    ap.add_argument("--repo", help="also time `diagnose LOG --repo REPO` (its checker answer cached by a first run)")
    args = ap.parse_args()
    log = Path(args.log)
    size = args.size_mb << 20
    if not log.exists() or log.stat().st_size < size * 0.99:
        print(f"generating {log} ({args.size_mb} MB, 64 ranks)...", file=sys.stderr)
        generate(log, size)
    mb = log.stat().st_size / 1e6
    refs = Path(args.references) if args.references else ROOT / "references"
    pats = [p for e in load_entries(refs) for s in e.signatures if (p := ere(s.regex))]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(pats) + "\n")
        pat_file = f.name
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL)  # warm the page cache for both
    g_s, g_rss, g_rc, g_out, g_cpu = timed(["grep", "-E", "-c", "-f", pat_file, str(log)])
    d_s, d_rss, d_rc, d_out, d_cpu = timed([sys.executable, str(ROOT / "scripts" / "diagnose.py"), str(log), "--json", "--quiet",
                                     "--references", str(refs)])
    repo = _repo_run(log, refs, mb, args.repo) if args.repo else None
    os.unlink(pat_file)
    result = json.loads(d_out)
    top = result["causes"][0]["id"] if result["causes"] else None
    ff = result["first_failure"] or {}
    report = {
        "log_mb": round(mb, 1), "signatures": len(pats),
        "grep": {"seconds": round(g_s, 2), "cpu_seconds": round(g_cpu, 2), "mb_per_s": round(mb / g_s, 1), "peak_rss_mb": round(g_rss / 1024, 1),
                 "matching_lines": int(g_out or 0)},
        "diagnose": {"seconds": round(d_s, 2), "cpu_seconds": round(d_cpu, 2), "mb_per_s": round(mb / d_s, 1), "peak_rss_mb": round(d_rss / 1024, 1),
                     "engine": result["stats"]["engine"], "top_cause": top, "first_failure_rank": ff.get("rank"),
                     "first_failure_line": ff.get("line")},
        "throughput_ratio_vs_grep": round(g_s / d_s, 3),
        # on a shared machine wall time follows the load; CPU time (user + system) of each process is steadier
        "cpu_ratio_vs_grep": round(g_cpu / d_cpu, 3),
        "targets": {"ratio>=1": g_s / d_s >= 1, "peak_rss<=64MB": d_rss / 1024 <= 64,
                    "found_buried_failure": top == "peer_died_first" and ff.get("rank") == BAD_RANK},
    }
    if repo is not None:
        report["diagnose_repo"] = repo
        report["targets"]["repo_peak_rss<=64MB"] = repo["peak_rss_mb"] <= 64
    print(json.dumps(report, indent=2))
    if not args.keep:
        log.unlink()
    return 0 if all(report["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
