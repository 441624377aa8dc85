"""Large logs of 8-64 ranks, generated on demand from short REAL torchrun runs of the eval programs.

A recording (evals/agentic/recordings/<name>.log, a few KB) is the console of one real run,
`torchrun --standalone --nproc_per_node=4 --tee 3 PROGRAM ARGS` (gloo on CPU), so every line carries its
rank (`[default2]:`). A large log is built from two recordings: a healthy one (training step lines) and
a failing one. The healthy lines are replicated over the target ranks (rank numbers rewritten, step
numbers advanced) until the first failure's place (`bury`, a fraction of the size); then the failing
run's lines follow in their recorded order, the failing rank renumbered to the case's odd rank and every
other rank's lines (the echoes) repeated for each target rank, spread over the remaining noise; the
launcher's summary closes the file. Nothing is invented: each line is a recorded line with its rank and
step numbers changed.

The files (100 MB and more) are never committed: they are written to evals/.cache/large_logs/ (ignored
by git), named by a hash of everything they are made from, and reused while that hash holds.

    python -m distdoctor.evals.large_logs record [NAME...]    # re-record (real torchrun runs, 4 ranks)
    python -m distdoctor.evals.large_logs generate CASE.yaml  # write one case's large log, print its path
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import random
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from distdoctor import paths

RECORDINGS = paths.ROOT / "evals" / "agentic" / "recordings"
CACHE = paths.ROOT / "evals" / ".cache" / "large_logs"
GENERATOR_VERSION = 3  # bump when the output for the same inputs changes
HEALTHY = "healthy_4"

RANK_PREFIX = re.compile(r"^\[default(\d+)\]:")
RANK_PREFIX_B = re.compile(rb"^\[default(\d+)\]:")
# every place a rank number shows in these logs: tee prefix, torch's traceback prefix, program prints,
# the launcher's summary and monitored_barrier's message
RANK_MENTIONS = re.compile(r"(\[default|\[rank|\brank |\brank=|\brank\s*: |local_rank: |\bRank )(\d+)")
STEP = re.compile(r"\bstep (\d+)")


class RecordingError(ValueError):
    """A recording is missing or malformed; the message names the file."""


@dataclass(frozen=True)
class Spec:
    """What one large log is made of (the `logs` block of an agentic case)."""

    recording: str
    ranks: int
    size_mb: float
    odd_rank: int | None  # the recorded failing rank becomes this rank
    bury: float = 0.8  # where the first failure lands, as a fraction of the size
    seed: int = 0
    layout: str = "interleaved"  # or per_rank: a folder of rank_N.log (+ launcher.log), as collected from nodes

    @classmethod
    def from_dict(cls, d: dict) -> "Spec":
        return cls(str(d["recording"]), int(d["ranks"]), float(d["size_mb"]), d.get("odd_rank"),
                   float(d.get("bury", 0.8)), int(d.get("seed", 0)), str(d.get("layout", "interleaved")))


def load_recordings() -> dict[str, dict]:
    """The recordings manifest (evals/agentic/recordings/recordings.yaml), by name."""
    path = RECORDINGS / "recordings.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise RecordingError(f"{path}: {exc}".replace("\n", " ")) from None
    return {r["name"]: r for r in data["recordings"]}


def recording_text(name: str) -> str:
    path = RECORDINGS / f"{name}.log"
    if not path.is_file():
        raise RecordingError(f"{path}: recording missing (python -m distdoctor.evals.large_logs record {name})")
    return path.read_text(encoding="utf-8")


# ---------------------------------------------------------------- recording (real runs)

def record(names: list[str] | None = None) -> int:
    """Run each recording's program for real and write <name>.log + <name>.meta.yaml; 1 if one did not reproduce."""
    import torch

    from distdoctor.runner import run_torchrun

    status = 0
    for name, r in load_recordings().items():
        if names and name not in names:
            continue
        res = run_torchrun(r["program"], int(r["nproc"]), [str(a) for a in r.get("args", [])], timeout=90,
                           cwd=paths.ROOT, launcher_args=["--tee", "3"])
        missing = [s for s in r["expect"] if s not in res.output]
        if missing or bool(r.get("ok")) != res.ok:
            print(f"{name}: did not reproduce (exit {res.returncode}, missing {missing})", file=sys.stderr)
            status = 1
            continue
        (RECORDINGS / f"{name}.log").write_text(res.output, encoding="utf-8")
        cmd = ["torchrun", "--standalone", f"--nproc_per_node={r['nproc']}", "--tee", "3", r["program"],
               *map(str, r.get("args", []))]
        meta = {"source": f"produced here: {' '.join(cmd)} (OMP_NUM_THREADS=1, gloo on CPU)",
                "torch": str(torch.__version__), "recorded": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
                "exit": res.returncode, "failing_rank": r.get("failing_rank")}
        (RECORDINGS / f"{name}.meta.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
        print(f"{name}: {len(res.output)} bytes", file=sys.stderr)
    return status


# ---------------------------------------------------------------- generating a large log

def _renumber(line: str, mapping: dict[int, int]) -> str:
    return RANK_MENTIONS.sub(lambda m: m.group(1) + str(mapping.get(int(m.group(2)), int(m.group(2)))), line)


def _split(text: str) -> tuple[dict[int, list[str]], list[str], list[str]]:
    """(rank -> its lines in order, launcher lines before the first rank line, launcher lines after)."""
    per_rank: dict[int, list[str]] = {}
    head: list[str] = []
    tail: list[str] = []
    for ln in text.splitlines(keepends=True):
        if not ln.endswith("\n"):
            ln += "\n"
        m = RANK_PREFIX.match(ln)
        if m:
            per_rank.setdefault(int(m.group(1)), []).append(ln)
        elif per_rank:
            tail.append(ln)
        else:
            head.append(ln)
    return per_rank, head, tail


def _noise_templates(ranks: int) -> tuple[list[tuple[str, int, str]], int]:
    """Healthy step lines for every target rank as (before, step, after), in recorded interleaving order,
    and how many steps one pass covers."""
    per_rank, _, _ = _split(recording_text(HEALTHY))
    rec_ranks = sorted(per_rank)
    order = [RANK_PREFIX.match(ln) for ln in recording_text(HEALTHY).splitlines(keepends=True)]
    out: list[tuple[str, int, str]] = []
    max_step = 0
    cursor = {r: 0 for r in rec_ranks}
    for m in order:
        if not m:
            continue
        k = int(m.group(1))
        ln = per_rank[k][cursor[k]]
        cursor[k] += 1
        s = STEP.search(ln)
        if not s:
            continue
        max_step = max(max_step, int(s.group(1)))
        for target in range(k, ranks, len(rec_ranks)):
            t = _renumber(ln, {k: target})
            s2 = STEP.search(t)
            out.append((t[:s2.start(1)], int(s2.group(1)), t[s2.end(1):]))
    return out, max_step + 1


def cache_path(case_id: str, spec: Spec) -> Path:
    h = hashlib.sha256(json.dumps([GENERATOR_VERSION, spec.__dict__], sort_keys=True).encode())
    for name in (HEALTHY, spec.recording):
        h.update(recording_text(name).encode())
    return CACHE / f"{case_id}-{h.hexdigest()[:16]}.log"


def ensure(case_id: str, spec: Spec, cache: Path | None = None) -> Path:
    """The case's large log (a file, or a folder for the per_rank layout), generated once into the cache
    (atomically) and reused."""
    path = cache_path(case_id, spec)
    if cache is not None:
        path = cache / path.name
    if spec.layout == "per_rank":
        path = path.with_suffix(".d")
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f"{case_id}-*"):  # an older version of this case's log
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        generate(tmp, spec)
        if spec.layout == "per_rank":
            split_by_rank(tmp, tmp.with_name(tmp.name + ".d"))
            os.replace(tmp.with_name(tmp.name + ".d"), path)
        else:
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        if tmp.with_name(tmp.name + ".d").is_dir():
            shutil.rmtree(tmp.with_name(tmp.name + ".d"))
    return path


def split_by_rank(interleaved: Path, folder: Path) -> None:
    """One file per rank (rank_N.log, the tee prefix taken off, as each rank's own log has it) and the
    launcher's lines in launcher.log."""
    folder.mkdir()
    files: dict[int | None, object] = {}
    try:
        with open(interleaved, "rb") as f:
            for line in f:
                m = RANK_PREFIX_B.match(line)
                rank = int(m.group(1)) if m else None
                out = files.get(rank)
                if out is None:
                    name = f"rank_{rank}.log" if rank is not None else "launcher.log"
                    out = files[rank] = open(folder / name, "wb", buffering=1 << 16)
                out.write(line[m.end():] if m else line)
    finally:
        for out in files.values():
            out.close()


def generate(path: Path, spec: Spec) -> int:
    """Write the large log of `spec` to path; returns its size in bytes."""
    rec = load_recordings().get(spec.recording)
    if rec is None:
        raise RecordingError(f"{RECORDINGS / 'recordings.yaml'}: no recording named {spec.recording!r}")
    rng = random.Random(spec.seed)
    size = int(spec.size_mb * 1024 * 1024)
    noise, steps_per_pass = _noise_templates(spec.ranks)
    per_rank, head, tail = _split(recording_text(spec.recording))
    failing = rec.get("failing_rank")
    rec_ranks = sorted(per_rank)
    odd = spec.odd_rank if spec.odd_rank is not None else (failing if failing is not None else 0)
    # the failing run: the failing rank's lines once (as the odd rank), every other rank's lines per target
    others = [t for t in range(spec.ranks) if t != odd]
    root_lines = [_renumber(ln, {failing: odd}) for ln in per_rank.get(failing, [])] if failing is not None else []
    echo_sources = [k for k in rec_ranks if k != failing]
    echoes: list[list[str]] = []
    for i, target in enumerate(others):
        k = echo_sources[i % len(echo_sources)]
        mapping = {k: target}
        if failing is not None:
            mapping[failing] = odd
        echoes.append([_renumber(ln, mapping) for ln in per_rank[k]])
    if failing is None:  # every rank fails alike: the odd rank's own copy goes first
        root_lines = [_renumber(ln, {echo_sources[0]: odd}) for ln in per_rank[echo_sources[0]]]
    tail_text = "".join(_renumber(ln, {failing: odd}) if failing is not None else ln for ln in tail).encode()
    written = 0
    step_base = 0
    with open(path, "wb", buffering=1 << 20) as f:
        def noise_pass(skip: int | None) -> bytes:
            nonlocal step_base
            prefix = f"[default{skip}]:" if skip is not None else None
            chunk = "".join(a + str(s + step_base) + b for a, s, b in noise
                            if prefix is None or not a.startswith(prefix))
            step_base += steps_per_pass
            return chunk.encode()

        for ln in head:
            f.write(ln.encode())
            written += len(ln)
        while written < size * spec.bury:
            chunk = noise_pass(None)
            f.write(chunk)
            written += len(chunk)
        # the failing run's steps continue the healthy run's count
        fail_base = step_base

        def shift(text: str) -> str:
            return STEP.sub(lambda m: f"step {int(m.group(1)) + fail_base}", text)

        root = shift("".join(root_lines)).encode()
        f.write(root)
        written += len(root)
        # the echoes of the other ranks arrive one by one, interleaved with the noise of ranks still running
        pending = list(echoes)
        rng.shuffle(pending)
        end = size - len(tail_text)
        while written < end or pending:
            if pending and (written >= end or rng.random() < 0.35):
                block = shift("".join(pending.pop())).encode()
            else:
                block = noise_pass(odd)
                if written + len(block) > end:  # the last pass: whole lines, just past the size asked for
                    cut = block.find(b"\n", end - written) + 1
                    block = block[:cut] if cut else block
            f.write(block)
            written += len(block)
        f.write(tail_text)
        written += len(tail_text)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m distdoctor.evals.large_logs", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="re-record the short real runs (torchrun, 4 gloo ranks)")
    r.add_argument("names", nargs="*")
    g = sub.add_parser("generate", help="write an agentic case's large log into the cache, print its path")
    g.add_argument("case", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "record":
        return record(args.names or None)
    from distdoctor.evals.agentic import AgenticError, load_case

    try:
        case = load_case(args.case)
        print(ensure(case.id, Spec.from_dict(case.logs)))
    except (AgenticError, RecordingError) as exc:
        print(f"large_logs: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    from distdoctor.cli import quiet_on_broken_pipe

    sys.exit(quiet_on_broken_pipe(main))
