"""Live-hang cases of `python evals/run_evals.py --e2e`: each hang program of distdoctor.hang.programs hangs for
real under torchrun (gloo, CPU); once it is stuck, `scripts/hang.py --pid <agent> --json` must name the odd
ranks, the cause (first) and the location line. The job's whole process tree is killed after; a process left
behind fails the case. Results are LoopResults with a `run` step (the job got stuck) and a `diagnose` step
(the verdict, scored as odd ranks + cause + line), so the closed-loop report shows them beside the others."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distdoctor import paths
from distdoctor.evals.e2e import LoopResult, Step
from distdoctor.hang import jobs
from distdoctor.hang.programs import CASES, HangCase

HANG = paths.ROOT / "scripts" / "hang.py"


def score(case: HangCase, out: dict) -> tuple[bool, str]:
    """(passed, detail): odd ranks, first cause and location line all as expected."""
    got_cause = (out.get("causes") or [{}])[0].get("id")
    loc = out.get("location") or {}
    checks = {"odd ranks": out.get("odd_ranks") == list(case.odd_ranks), "cause": got_cause == case.cause,
              "line": Path(str(loc.get("file"))).name == case.program.name and loc.get("line") == case.line}
    detail = (f"odd {out.get('odd_ranks')} cause {got_cause} at {Path(str(loc.get('file'))).name}:{loc.get('line')}"
              + "".join(f"; wrong {k}" for k, ok in checks.items() if not ok))
    return all(checks.values()), detail


def _one(case: HangCase, job: jobs.Job, env: dict, say, answer: dict | None = None) -> LoopResult:
    """Wait until the job is stuck, run hang.py on it, score its answer (kept in `answer` when given), kill it."""
    res = LoopResult(f"evals/programs/{case.program.name}", case.cause, False, "failed")
    try:
        t = time.monotonic()
        try:
            jobs.wait_stuck(job, 120, fr_ranks=case.nproc if case.flight_recorder else 0, in_init=case.in_init,
                            fr_prefix=env.get("TORCH_FR_DUMP_TEMP_FILE"))
        except (TimeoutError, RuntimeError) as exc:
            res.steps.append(Step("run", False, str(exc).splitlines()[0], time.monotonic() - t, job.output()[-1500:]))
            return res
        res.steps.append(Step("run", True, f"stuck on {case.nproc} ranks", time.monotonic() - t))
        t = time.monotonic()
        proc = subprocess.run([sys.executable, str(HANG), "--pid", str(job.pid), "--json"], capture_output=True,
                              text=True, timeout=120)
        seconds = time.monotonic() - t
        try:
            out = json.loads(proc.stdout)
        except ValueError:
            res.steps.append(Step("diagnose", False, f"hang.py exit {proc.returncode}: {proc.stderr.strip()[:200]}",
                                  seconds))
            return res
        if answer is not None:
            answer.update(out)
        ok, detail = score(case, out)
        res.diagnosed = (out.get("causes") or [{}])[0].get("id")
        res.steps.append(Step("diagnose", ok, f"hang.py in {seconds:.1f}s: {detail}", seconds))
        res.passed, res.status = ok, "passed" if ok else "failed"
    finally:
        left = job.kill()
        if left:
            res.passed, res.status = False, "failed"
            res.steps.append(Step("cleanup", False, f"processes left behind: {left}"))
        say(f"{res.status}")
    return res


def _start(case: HangCase) -> tuple[HangCase, jobs.Job, dict]:
    tmp = Path(tempfile.mkdtemp(prefix=f"distdoctor-{case.name}-"))
    env = {"TORCH_FR_DUMP_TEMP_FILE": str(tmp / "trace_")} if case.flight_recorder else {}
    return case, jobs.start(case.program, case.nproc, env, log_dir=tmp, stdin_open=case.stdin_open), env


BATCH = 8  # jobs waiting at once: more (30 jobs of 2-3 ranks, some spinning a core) overload a small machine


def run_all(progress: bool = True, together: bool = True) -> list[LoopResult]:
    """Every hang case; the jobs start BATCH at a time (they mostly wait), each is diagnosed and killed in turn;
    together=False: one job at a time, started, diagnosed and killed before the next (a small machine)."""
    def say(name: str):
        return lambda msg: print(f"[e2e] {name}: {msg}", file=sys.stderr, flush=True) if progress else None

    size = BATCH if together else 1
    started = []
    out = []
    try:
        for i in range(0, len(CASES), size):
            started = [_start(case) for case in CASES[i:i + size]]
            out += [_one(case, job, env, say(case.program.name)) for case, job, env in started]
        return out
    finally:
        for _, job, _ in started:
            job.kill()
