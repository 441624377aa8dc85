"""Live hangs: each hang program under evals/programs/ really hangs under torchrun (gloo, CPU) and goes through
the live-hang case of `run_evals.py --e2e` (distdoctor.evals.hang_cases._one): once it is stuck,
`hang.py --pid <agent pid> --json` must name the odd ranks, the cause (with its entry) and the line; then the job's
whole process tree is killed and nothing may be left. The jobs start in batches of a few to keep the wall time
low without overloading the machine; the e2e test leaves these jobs to this module rather than start them again."""
from __future__ import annotations

from pathlib import Path

import pytest

from distdoctor.evals import hang_cases
from distdoctor.hang import jobs
from distdoctor.hang.programs import CASES

pytestmark = pytest.mark.torchrun


BATCH = 8  # jobs running at once: 30 jobs of 2-3 ranks started together overload a 2-core machine


class Batches:
    """The selected hang jobs, started BATCH at a time in CASES order: a case's test starts its batch when none of
    it runs yet (the tests run in that order, each killing its own job)."""

    def __init__(self, cases, tmp_path_factory):
        self.cases = list(cases)
        self.tmp = tmp_path_factory
        self.started: dict = {}

    def job(self, case):
        if case.name not in self.started:
            i = [c.name for c in self.cases].index(case.name)
            for c in self.cases[i:i + BATCH]:
                if c.name not in self.started:
                    tmp = self.tmp.mktemp(c.name)
                    env = {"TORCH_FR_DUMP_TEMP_FILE": str(tmp / "trace_")} if c.flight_recorder else {}
                    self.started[c.name] = (jobs.start(c.program, c.nproc, env, log_dir=tmp,
                                                       stdin_open=c.stdin_open), env)
        return self.started[case.name]


@pytest.fixture(scope="module")
def running(request, tmp_path_factory):
    """The selected hang jobs (all, or those -k keeps), started in batches; killed (whole trees) at the end
    whatever happened."""
    selected = {item.callspec.params["case"].name for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "case" in item.callspec.params}
    batches = Batches([c for c in CASES if not selected or c.name in selected], tmp_path_factory)
    try:
        yield batches
    finally:
        for job, _ in batches.started.values():
            job.kill()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_live_hang_is_named(running, case):
    job, env = running.job(case)
    out: dict = {}
    try:
        e2e_case = hang_cases._one(case, job, env, say=lambda msg: None, answer=out)  # waits, hang.py, kills the tree
    finally:
        left = job.kill()
    assert not left, f"processes left behind: {left}"
    assert e2e_case.passed and [s.name for s in e2e_case.steps] == ["run", "diagnose"], e2e_case.to_json()
    assert out["odd_ranks"] == list(case.odd_ranks), out["verdict"]
    assert out["causes"][0]["id"] == case.cause, out["causes"]
    assert out["causes"][0]["entry"].startswith("references/")
    assert Path(out["location"]["file"]).name == case.program.name and out["location"]["line"] == case.line


def test_run_all_one_job_at_a_time(monkeypatch):
    """`run_evals.py --e2e --hang-only`: each job is started, diagnosed and killed before the next starts."""
    picked = [c for c in CASES if c.name in ("hang_subprocess_stuck", "hang_partial_new_group")]
    monkeypatch.setattr(hang_cases, "CASES", picked)
    started = []
    real_start = jobs.start

    def start(*args, **kwargs):
        alive = [j for j in started if j.proc.poll() is None]
        assert not alive, f"a job still runs when the next starts: {[j.pid for j in alive]}"
        started.append(real_start(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(jobs, "start", start)
    try:
        results = hang_cases.run_all(progress=False, together=False)
    finally:
        left = [p for j in started for p in j.kill()]
    assert not left, f"processes left behind: {left}"
    assert [r.passed for r in results] == [True, True], [r.to_json() for r in results]
