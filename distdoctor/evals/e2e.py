"""The closed loop: run a broken program for real, diagnose its real log, apply the chosen patch to a
temporary copy, run again. A program passes only when the diagnosis names its cause AND the rerun
finishes on every rank (each prints `DISTDOCTOR_OK rank=<r> ...`).

The programs come from a manifest (evals/e2e.yaml):

    programs:
      - program: evals/programs/device_int_to.py      # relative to the repository root
        cause: nccl_without_cuda                      # what the diagnosis must name
        args: []                                      # script arguments of the broken run
        timeout: 60                                   # seconds per run (default 60)
      - program: evals/programs/peer_shard_index.py
        cause: peer_died_first
        first_failure_rank: 1                         # the diagnosis must also name this rank
        fix_args: [--shards, "2"]                     # no patch exists: the first failure's fix
      - program: evals/programs/device_global_rank.py
        cause: local_rank_device
        log: tests/data/logs/field_nanogpt_invalid_device_ordinal.log  # cannot fail on CPU: diagnose this log
        log_note: "binding a CUDA device cannot fail on a CPU-only machine"
      - program: evals/programs/backend_nanochat.py
        cause: nccl_without_cuda
        context: "torchrun --nproc_per_node=2 on a CPU-only machine"  # the user's words go with the log

Patches that introduce an environment switch (sdpa_force's <PREFIX>_FORCE_SDPA) are applied with
--env-prefix DISTDOCTOR, and the switch is set to 1 for the rerun.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

import yaml

from distdoctor import paths
from distdoctor import runner
from distdoctor.runner import run_torchrun, succeeded

MANIFEST = paths.ROOT / "evals" / "e2e.yaml"
PATCH_CLI = paths.ROOT / "scripts" / "patch_backend.py"
NPROC = 2


class ManifestError(ValueError):
    """evals/e2e.yaml is malformed; the message names the entry and field."""


@dataclass
class Step:
    name: str  # run | diagnose | patch | rerun
    ok: bool | None  # None: skipped
    detail: str
    seconds: float = 0.0
    tail: str = ""  # the last lines of a run that did not end as it should


@dataclass
class LoopResult:
    program: str
    cause: str
    passed: bool
    status: str  # passed | failed | skipped
    steps: list[Step] = field(default_factory=list)
    diagnosed: str | None = None
    patches: list[str] = field(default_factory=list)
    checksums: dict[int, str] = field(default_factory=dict)  # {rank: checksum} its rerun's DISTDOCTOR_OK lines printed

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Entry:
    program: str
    cause: str
    args: list[str]
    timeout: float
    first_failure_rank: int | None
    fix_args: list[str] | None
    log: str | None
    log_note: str
    context: str = ""  # what the user says they ran, given to the diagnosis with the log


def load_manifest(path: Path = MANIFEST) -> list[Entry]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ManifestError(f"{path}: {exc}".replace("\n", " ")) from None
    items = (data or {}).get("programs") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ManifestError(f"{path}: field programs: expected a non-empty list")
    out = []
    for i, it in enumerate(items):
        where = f"{path}: programs[{i}]"
        if not isinstance(it, dict):
            raise ManifestError(f"{where}: expected a mapping")
        for key in ("program", "cause"):
            if not isinstance(it.get(key), str) or not it[key]:
                raise ManifestError(f"{where}: field {key}: missing or not a string")
        for key in ("args", "fix_args"):
            v = it.get(key)
            if v is not None and not (isinstance(v, list) and all(isinstance(a, (str, int)) for a in v)):
                raise ManifestError(f"{where}: field {key}: expected a list of strings")
        out.append(Entry(it["program"], it["cause"], [str(a) for a in it.get("args") or []],
                         float(it.get("timeout", 60)), it.get("first_failure_rank"),
                         None if it.get("fix_args") is None else [str(a) for a in it["fix_args"]],
                         it.get("log"), str(it.get("log_note", "")), str(it.get("context") or "")))
    return out


ENV_PREFIX = "DISTDOCTOR"  # --env-prefix given to patch_backend.py; switches a patch introduces are set on rerun


@lru_cache(maxsize=1)
def patch_catalog() -> tuple[dict, ...]:
    """Every patch ({id, cause, env_var, ...}), from `patch_backend.py --list --json`."""
    if not PATCH_CLI.is_file():
        return ()
    proc = subprocess.run([sys.executable, str(PATCH_CLI), "--list", "--json"], capture_output=True, text=True,
                          timeout=120, cwd=paths.ROOT)
    if proc.returncode != 0:
        return ()
    try:
        items = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return ()
    if isinstance(items, dict):
        items = items.get("patches", [])
    return tuple(p for p in items if isinstance(p, dict) and "id" in p and "cause" in p)


def patches_for(cause: str) -> list[str]:
    return [p["id"] for p in patch_catalog() if p["cause"] == cause]


def switches_for(ids: list[str]) -> dict[str, str]:
    """Environment switches the applied patches introduce (e.g. DISTDOCTOR_FORCE_SDPA=1), turned on for the rerun."""
    out = {}
    for p in patch_catalog():
        if p["id"] in ids and p.get("env_var"):
            out[str(p["env_var"]).replace("<PREFIX>", ENV_PREFIX)] = "1"
    return out


def apply_patches(directory: Path, ids: list[str]) -> tuple[bool, str]:
    """Run `patch_backend.py DIR --only ids` (it writes in place); return (ok, its change lines)."""
    cmd = [sys.executable, str(PATCH_CLI), str(directory), "--only", ",".join(ids), "--env-prefix", ENV_PREFIX,
           "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=paths.ROOT)
    lines = [ln.strip().replace(str(directory) + "/", "") for ln in proc.stdout.splitlines() if ln.strip()]
    report = "; ".join(lines)[:400]
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
    return True, report or "(no change reported)"


def patched_source(program: str) -> str:
    """The source the closed loop reruns for a manifest program whose cause it diagnosed: a copy patched by
    every patch of that cause, as in run_entry (tests that patch the program their own way compare with it)."""
    [e] = [e for e in load_manifest() if e.program == program]
    with tempfile.TemporaryDirectory(prefix="distdoctor-e2e-") as tmp:
        copy = copy_program(paths.ROOT / program, Path(tmp))
        ok, report = apply_patches(Path(tmp), patches_for(e.cause))
        if not ok:
            raise RuntimeError(f"{program}: {report}")
        return copy.read_text(encoding="utf-8")


def copy_program(src: Path, work: Path) -> Path:
    """Copy a manifest program and its `_*.py` helpers into `work`, where the loop patches and reruns them;
    returns the copy of the program."""
    shutil.copy2(src, work / src.name)
    for helper in src.parent.glob("_*.py"):
        shutil.copy2(helper, work / helper.name)
    return work / src.name


def finished_ranks(output: str) -> set[int]:
    return set(runner.finished_ranks(output))


def output_tail(output: str, n: int = 15) -> str:
    """The lines leading to the first root error, then the last n lines of a failed run."""
    lines = output.rstrip().splitlines()
    err = last_error(output)
    head: list[str] = []
    for i, ln in enumerate(lines):
        if ln.strip()[:200] == err:
            head = lines[max(0, i - 5):i + 1]
            if i + 1 >= len(lines) - n:
                head = []
            break
    return "\n".join(head + (["..."] if head else []) + lines[-n:])


def last_error(output: str) -> str:
    """The first exception line of a failed run that is not an echo (launcher summary, peer closed the
    connection), else the last non-blank line: a one-line reason for the report."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    raised = [ln for ln in lines if re.search(r"\b\w*(Error|Exception)\b:", ln) and "ChildFailedError" not in ln]
    roots = [ln for ln in raised if not re.search(r"Connection (closed|reset) by peer", ln)]
    for group in (roots, raised):
        if group:
            return group[0][:200]
    return lines[-1][:200] if lines else "(no output)"


def _diagnose(log: str, context: str = "") -> dict:
    from distdoctor.evals.responders import BuiltinResponder

    return BuiltinResponder().diagnose(log, context)


def _ffr(result: dict) -> int | None:
    from distdoctor.evals.responders import _as_rank

    return _as_rank(result.get("first_failure"))


def run_entry(e: Entry, progress: bool = True, diagnose: Callable[[str], dict] | None = None) -> LoopResult:
    """The four steps for one program; each is recorded, a failing step ends the loop early only when
    nothing after it can run."""
    def say(msg: str) -> None:
        if progress:
            print(f"[e2e] {Path(e.program).name}: {msg}", file=sys.stderr, flush=True)

    res = LoopResult(e.program, e.cause, False, "failed")
    src = paths.ROOT / e.program
    if not src.is_file():
        res.status = "skipped"
        res.steps.append(Step("run", None, f"program {e.program} does not exist yet"))
        say("skipped (program missing)")
        return res

    # 1. run the broken program (or read the real log when it cannot fail here)
    t0 = time.monotonic()
    if e.log:
        log_path = paths.ROOT / e.log
        if not log_path.is_file():
            res.status = "skipped"
            res.steps.append(Step("run", None, f"log {e.log} does not exist yet"))
            return res
        log = log_path.read_text(encoding="utf-8", errors="replace")
        res.steps.append(Step("run", None, f"not run here ({e.log_note or 'cannot fail on this machine'}); "
                                           f"diagnosing the real log {e.log}"))
    else:
        say("running broken program")
        r = run_torchrun(src, NPROC, e.args, timeout=e.timeout, cwd=src.parent)
        log = r.output
        failed = not r.ok or len(finished_ranks(log)) < NPROC
        how = "timed out" if r.timed_out else f"exit {r.returncode}"
        res.steps.append(Step("run", failed, f"broken run {how}, {len(finished_ranks(log))}/{NPROC} ranks finished"
                              + ("" if failed else " — it did NOT fail, nothing to fix"), time.monotonic() - t0))
        if not failed:
            return res

    # 2. diagnose the real log
    t0 = time.monotonic()
    say("diagnosing")
    try:
        result = (diagnose or _diagnose)(log, e.context) if e.context else (diagnose or _diagnose)(log)
    except Exception as exc:
        res.steps.append(Step("diagnose", False, f"diagnosis raised {type(exc).__name__}: {exc}"[:300]))
        return res
    ranked = [c.get("id") for c in result.get("causes") or [] if isinstance(c, dict)]
    res.diagnosed = ranked[0] if ranked else None
    diag_ok = res.diagnosed == e.cause
    detail = f"diagnosed {res.diagnosed or '(nothing)'} (expected {e.cause})"
    if e.first_failure_rank is not None:
        ffr = _ffr(result)
        detail += f", first failure rank {ffr} (expected {e.first_failure_rank})"
        diag_ok = diag_ok and ffr == e.first_failure_rank
    res.steps.append(Step("diagnose", diag_ok, detail, time.monotonic() - t0))

    # 3. apply the chosen patch (every patch of the diagnosed cause) to a temporary copy
    with tempfile.TemporaryDirectory(prefix="distdoctor-e2e-") as tmp:
        work = Path(tmp)
        copy_program(src, work)
        args = list(e.args)
        t0 = time.monotonic()
        ids = patches_for(res.diagnosed) if res.diagnosed else []
        res.patches = ids
        if e.fix_args is not None:
            args = list(e.fix_args)
            res.steps.append(Step("patch", diag_ok, f"no code patch for {e.cause}: the first failure's fix, "
                                                    f"rerun with {' '.join(args) or '(no args)'}"))
        elif not ids:
            what = f"the diagnosed cause {res.diagnosed}" if res.diagnosed else "a log with no diagnosed cause"
            res.steps.append(Step("patch", False, f"no patch for {what}"
                                  + ("" if PATCH_CLI.is_file() else " (scripts/patch_backend.py missing)")))
        else:
            say(f"patching with {','.join(ids)}")
            before = (work / src.name).read_bytes()
            ok, report = apply_patches(work, ids)
            changed = (work / src.name).read_bytes() != before
            res.steps.append(Step("patch", ok and changed,
                                  f"--only {','.join(ids)}: " + (report if changed else f"file unchanged ({report})"),
                                  time.monotonic() - t0))

        # 4. run again (pointless when no patch or fix could be applied)
        if res.steps[-1].ok is False and e.fix_args is None:
            res.steps.append(Step("rerun", None, "not run: nothing was patched"))
            say("failed")
            return res
        t0 = time.monotonic()
        say("rerunning")
        env = switches_for(res.patches) if e.fix_args is None else {}
        r = run_torchrun(work / src.name, NPROC, args, timeout=e.timeout, cwd=work, env=env)
        res.checksums = runner.finished_ranks(r.output)
        note = ""
        if not succeeded(r) and not r.timed_out and set(res.checksums) >= set(range(NPROC)):
            # every rank finished but the job's exit status is not 0 for another reason than gloo's
            # teardown abort: run once more and say so, rather than hide it or fail on a shutdown hiccup
            note = f" (retried: the first rerun exited {r.returncode} after every rank finished: " \
                   f"{last_error(r.output)[:120]})"
            r = run_torchrun(work / src.name, NPROC, args, timeout=e.timeout, cwd=work, env=env)
            res.checksums = runner.finished_ranks(r.output)
        done = set(res.checksums)
        rerun_ok = succeeded(r) and done >= set(range(NPROC))
        if rerun_ok and not r.ok:
            note += " (torch's gloo teardown abort after every rank finished: accepted, see references/backends.md)"
        how = "timed out" if r.timed_out else f"exit {r.returncode}"
        tail = "" if rerun_ok else " — " + last_error(r.output)
        with_env = f" with {' '.join(f'{k}={v}' for k, v in env.items())}" if env else ""
        res.steps.append(Step("rerun", rerun_ok, f"rerun{with_env} {how}, {len(done)}/{NPROC} ranks printed "
                                                 f"DISTDOCTOR_OK{tail}{note}",
                              time.monotonic() - t0, "" if rerun_ok else output_tail(r.output)))
    res.passed = diag_ok and rerun_ok and all(s.ok is not False for s in res.steps)
    res.status = "passed" if res.passed else "failed"
    say(res.status)
    return res


def run_loop(manifest: Path = MANIFEST, progress: bool = True,
             diagnose: Callable[[str], dict] | None = None) -> list[LoopResult]:
    """Every program of the manifest, in order; `diagnose` replaces the built-in diagnosis (tests only).
    With the project's manifest, the live-hang cases follow (distdoctor/evals/hang_cases.py)."""
    results = [run_entry(e, progress, diagnose) for e in load_manifest(manifest)]
    if Path(manifest) == MANIFEST:
        from distdoctor.evals import hang_cases
        results += hang_cases.run_all(progress)
    return results
