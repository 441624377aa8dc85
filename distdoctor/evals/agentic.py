"""Agentic cases (evals/agentic/*.yaml): a workspace plus the user's words, scored by outcome.

A case's workspace is made fresh in a temporary folder for every run:

    repo/            the case's repo (a small broken training program), copied
    logs/train.log   a large log generated from real recordings (large_log cases)
    logs/job.log     the live output of the job the harness started (hang cases)
    <skill folder>   the skill (SKILL.md, references/, scripts/, distdoctor/ ...) when it is available

The responder (the built-in tools, an agent command, or an agent CLI preset) works there with a time
limit; then the harness scores what came out:

    large_log  the cause named, and the first failing rank when the case knows it
    hang       the cause named, the odd rank(s), and the file:line they are stuck on (the job is killed after)
    fix        the job re-run under torchrun (gloo) finishes on every rank with equal parameter checksums
               (`DISTDOCTOR_OK rank=<r> checksum=<x>`), and nothing in repo/ outside `may_change` changed

Hang cases need the hang doctor (scripts/hang.py); where it is absent they are skipped, with the reason.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import yaml

from distdoctor import paths
from distdoctor.evals.responders import Answer, answer_from_diagnosis
from distdoctor.procs import kill_tree
from distdoctor.runner import finished_ranks, run_torchrun, succeeded, torchrun_cmd

AGENTIC_DIR = paths.ROOT / "evals" / "agentic"
HANG_CLI = paths.ROOT / "scripts" / "hang.py"
KINDS = ("short_log", "words", "large_log", "hang", "fix")
# what "the skill" is: everything SKILL.md points an agent at, and the package its scripts import
SKILL_PARTS = ("SKILL.md", "references", "scripts", "distdoctor", "schemas", "profiles", "patches")
# where each agent looks for a project skill (a folder holding SKILL.md)
SKILL_DIRS = {"generic": ".agents/skills/distdoctor", "claude": ".claude/skills/distdoctor",
              "codex": ".agents/skills/distdoctor", "gemini": ".gemini/skills/distdoctor",
              "opencode": ".opencode/skills/distdoctor"}
ANSWER_FORMAT = ('End with one JSON object: {"cause": "<cause id>", "first_failure_rank": <int or null>, '
                 '"odd_ranks": [<ints>], "location": {"file": "<file>", "line": <int>}} '
                 "(fields that do not apply may be left out).")


class AgenticError(ValueError):
    """An agentic case that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class AgenticCase:
    id: str
    kind: str
    words: str
    source: str
    expect: dict
    repo: str | None = None
    logs: dict | None = None
    job: dict | None = None
    path: Path | None = None

    @property
    def causes(self) -> tuple[str, ...]:
        c = self.expect.get("cause")
        return tuple(c) if isinstance(c, list) else ((c,) if c else ())

    @property
    def nproc(self) -> int:
        return int((self.job or {}).get("nproc", 2))

    @property
    def job_args(self) -> list[str]:
        return [str(a) for a in (self.job or {}).get("args", [])]

    @property
    def job_timeout(self) -> float:
        return float((self.job or {}).get("timeout", 90))

    def command(self) -> str:
        """The job as the user would type it, run in repo/."""
        return " ".join(["torchrun", "--standalone", f"--nproc_per_node={self.nproc}", self.job["program"],
                         *self.job_args])


# ---------------------------------------------------------------- loading

@lru_cache(maxsize=1)
def _schema() -> dict:
    return json.loads((paths.SCHEMAS / "agentic_case.schema.json").read_text(encoding="utf-8"))


def load_case(path: str | Path, causes: set[str] | None = None) -> AgenticCase:
    """Read and validate one case file; every problem is a one-line AgenticError naming file and field."""
    import jsonschema

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AgenticError(f"{p}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise AgenticError(f"{p}{f':{mark.line + 1}' if mark else ''}: invalid YAML: "
                           f"{getattr(exc, 'problem', exc)}") from None
    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(data),
                    key=lambda e: (len(list(e.path)), list(map(str, e.path))))
    if errors:
        e = errors[0]
        fld = "/".join(map(str, e.path)) or "(case)"
        raise AgenticError(f"{p}: field {fld}: {e.message[:200]}")
    case = AgenticCase(id=data["id"], kind=data["kind"], words=data["words"], source=data["source"],
                       expect=data["expect"], repo=data.get("repo"), logs=data.get("logs"), job=data.get("job"),
                       path=p)
    for i, c in enumerate(case.causes):
        if causes is not None and c not in causes:
            raise AgenticError(f"{p}: field expect/cause: {c!r} is not a cause id of taxonomy.yaml")
    if case.repo:
        src = paths.ROOT / case.repo
        if not src.exists():
            raise AgenticError(f"{p}: field repo: {case.repo} does not exist")
        entry = (src / case.job["program"]) if src.is_dir() else src
        if case.job and (not entry.is_file() or (src.is_file() and src.name != case.job["program"])):
            raise AgenticError(f"{p}: field job/program: {case.job['program']} is not in {case.repo}")
        loc = case.expect.get("location")
        if loc:
            target = (src / loc["file"]) if src.is_dir() else src
            lines = target.read_text(encoding="utf-8").splitlines() if target.is_file() else []
            for where in (loc, loc.get("branch") or loc):
                if target.name != Path(loc["file"]).name or len(lines) < where["line"] \
                        or where["text"] not in lines[where["line"] - 1]:
                    raise AgenticError(f"{p}: field expect/location: {loc['file']}:{where['line']} does not hold "
                                       f"{where['text']!r} (the program changed?)")
    return case


def load_cases(where: str | Path = AGENTIC_DIR, causes: set[str] | None = None) -> list[AgenticCase]:
    """Every *.yaml case of a folder (or one file), sorted by id; duplicate ids are an error."""
    p = Path(where)
    if not p.exists():
        raise AgenticError(f"{p}: no such file or folder")
    files = sorted(p.glob("*.yaml")) if p.is_dir() else [p]
    out: dict[str, AgenticCase] = {}
    for f in files:
        c = load_case(f, causes)
        if c.id in out:
            raise AgenticError(f"{f}: field id: duplicate id {c.id!r} (also in {out[c.id].path})")
        out[c.id] = c
    return [out[k] for k in sorted(out)]


# ---------------------------------------------------------------- the workspace

@dataclass
class Workspace:
    root: Path
    skill: Path | None = None  # SKILL.md inside the workspace, when the skill is available
    job_pid: int | None = None
    job_log: Path | None = None
    repo_before: dict[str, str] = field(default_factory=dict)

    @property
    def repo(self) -> Path:
        return self.root / "repo"


def install_skill(root: Path, layout: str = "generic") -> Path:
    """Copy the skill into root/<the folder this agent reads skills from>; return its SKILL.md."""
    dest = root / SKILL_DIRS[layout]
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in SKILL_PARTS:
        src = paths.ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=ignore, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy2(src, dest / part)
    return dest / "SKILL.md"


def tree_digest(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under folder, bytecode caches left out."""
    out = {}
    if not folder.is_dir():
        return out
    for f in sorted(folder.rglob("*")):
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
            out[f.relative_to(folder).as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def prepare(case: AgenticCase, tmp: Path, skill_layout: str | None) -> Workspace:
    """Build the case's fresh workspace in tmp/ws (the large log comes from the cache, generated if needed)."""
    ws = Workspace(tmp / "ws")
    ws.root.mkdir(parents=True)
    if case.repo:
        src = paths.ROOT / case.repo
        if src.is_dir():
            shutil.copytree(src, ws.repo, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            ws.repo.mkdir()
            shutil.copy2(src, ws.repo / src.name)
        ws.repo_before = tree_digest(ws.repo)
    if case.logs:
        from distdoctor.evals.large_logs import Spec, ensure

        made = ensure(case.id, Spec.from_dict(case.logs))
        if made.is_dir():  # a folder of per-rank logs
            shutil.copytree(made, ws.root / "logs")
        else:
            (ws.root / "logs").mkdir()
            shutil.copyfile(made, ws.root / "logs" / "train.log")
    if skill_layout:
        ws.skill = install_skill(ws.root, skill_layout)
    return ws


def payload(case: AgenticCase, ws: Workspace, causes: dict[str, str] | None = None) -> dict:
    """What an agent gets on stdin: the words, where things are, the causes to choose from; never the answer."""
    out: dict = {"id": case.id, "kind": case.kind, "words": case.words, "workspace": str(ws.root)}
    if case.repo:
        out["repo"] = "repo"
    if (ws.root / "logs").is_dir():
        out["logs"] = sorted(f.relative_to(ws.root).as_posix() for f in (ws.root / "logs").rglob("*") if f.is_file())
    if case.kind == "hang":
        out["job"] = {"pid": ws.job_pid, "command": case.command(), "cwd": "repo", "log": "logs/job.log"}
    if case.kind == "fix":
        out["run"] = {"command": case.command(), "cwd": "repo"}
    if causes:
        out["causes"] = causes
    out["answer"] = ANSWER_FORMAT
    return out


def prompt(p: dict) -> str:
    """The payload as one prompt for an agent CLI."""
    lines = [p["words"], "", f"Your working directory is the workspace {p['workspace']}."]
    if p.get("repo"):
        lines.append("The project's code is in repo/.")
    if p.get("logs"):
        lines.append("Logs: " + ", ".join(p["logs"]) + ".")
    if p.get("job"):
        j = p["job"]
        lines.append(f"The job is running now and makes no progress: `{j['command']}` in repo/, torchrun process "
                     f"id {j['pid']}; its output goes to {j['log']}. Do not kill it. Find which rank(s) are not "
                     "where the others are and the file:line they are stuck on.")
    if p.get("run"):
        lines.append(f"Make `{p['run']['command']}` (run in repo/) work on this machine (CPU only, no GPU). Change "
                     "only what you must in repo/; the harness runs the job again after you finish.")
    if p.get("causes"):
        lines += ["", "Name the cause with one of these ids:"]
        lines += [f"- {k}: {v}" for k, v in p["causes"].items()]
    lines += ["", p["answer"]]
    return "\n".join(lines)


@lru_cache(maxsize=1)
def cause_titles() -> dict[str, str]:
    """{cause id: title} from the taxonomy, the choices every agent gets."""
    try:
        from distdoctor.knowledge import load_taxonomy

        return {k: str((v or {}).get("title") or (v or {}).get("summary", "")).split(". ")[0][:160]
                for k, v in load_taxonomy().items()}
    except Exception:  # a missing taxonomy leaves the agent to name causes in its own words
        return {}


# ---------------------------------------------------------------- the job (hang cases)

def start_job(case: AgenticCase, ws: Workspace) -> subprocess.Popen:
    """Start the case's job in repo/, output to logs/job.log; return once its output matches `ready`
    (then `settle` seconds more). Raises AgenticError when it ends or never gets there."""
    (ws.root / "logs").mkdir(exist_ok=True)
    ws.job_log = ws.root / "logs" / "job.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with open(ws.job_log, "wb") as out:
        proc = subprocess.Popen(torchrun_cmd(case.job["program"], case.nproc, case.job_args), cwd=ws.repo, env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    ws.job_pid = proc.pid
    ready = re.compile(case.job["ready"])
    deadline = time.monotonic() + case.job_timeout
    while time.monotonic() < deadline:
        text = ws.job_log.read_text(encoding="utf-8", errors="replace")
        if ready.search(text):
            time.sleep(float(case.job.get("settle", 2)))
            if proc.poll() is None:
                return proc
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    stop_job(proc)
    tail = " ".join(ws.job_log.read_text(encoding="utf-8", errors="replace").split())[-200:]
    raise AgenticError(f"{case.id}: the job did not reach its hang ({case.job['ready']!r}): {tail}")


def stop_job(proc: subprocess.Popen) -> None:
    kill_tree(proc.pid)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# ---------------------------------------------------------------- responders

class AgenticResponder(Protocol):
    name: str

    def respond(self, case: AgenticCase, ws: Workspace) -> Answer: ...


class BuiltinTools:
    """distdoctor's own tools, no model: diagnose the logs, scripts/hang.py on the job, patch the repo."""

    name = "builtin (distdoctor tools)"

    def respond(self, case: AgenticCase, ws: Workspace) -> Answer:
        t0 = time.monotonic()
        ans = {"large_log": self._logs, "hang": self._hang, "fix": self._fix}[case.kind](case, ws)
        ans.seconds = time.monotonic() - t0
        return ans

    def _logs(self, case: AgenticCase, ws: Workspace) -> Answer:
        from distdoctor.diagnose import diagnose_paths

        return answer_from_diagnosis(diagnose_paths([str(ws.root / "logs")], context=case.words))

    def _hang(self, case: AgenticCase, ws: Workspace) -> Answer:
        proc = subprocess.run([sys.executable, str(HANG_CLI), "--pid", str(ws.job_pid), "--json"],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode == 2 or not proc.stdout.strip().startswith("{"):
            err = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            return Answer(None, error=f"hang.py: {err}"[:300])
        return answer_from_hang(json.loads(proc.stdout))

    def _fix(self, case: AgenticCase, ws: Workspace) -> Answer:
        from distdoctor.evals import e2e

        broken = run_torchrun(case.job["program"], case.nproc, case.job_args, timeout=case.job_timeout, cwd=ws.repo)
        if succeeded(broken):
            return Answer(None, error="the job did not fail: nothing to fix")
        ans = answer_from_diagnosis(e2e._diagnose(broken.output, case.words))
        ids = e2e.patches_for(ans.cause) if ans.cause else []
        if not ids:
            ans.error = ans.error or f"no patch for {ans.cause or 'an undiagnosed log'}"
            return ans
        ok, report = e2e.apply_patches(ws.repo, ids)
        if not ok:
            ans.error = f"patch_backend.py --only {','.join(ids)} failed: {report}"
        ans.patch = ids[0]
        return ans


def answer_from_hang(result: dict) -> Answer:
    """scripts/hang.py --json ({ranks, odd_ranks, causes: [{id, score, evidence}], location: {file, line}})."""
    ans = answer_from_diagnosis(result) if result.get("causes") else Answer(None, error="hang.py named no cause")
    odd = result.get("odd_ranks")
    ans.odd_ranks = [int(r) for r in odd if isinstance(r, int)] if isinstance(odd, list) else None
    ans.location = result.get("location") if isinstance(result.get("location"), dict) else None
    return ans


# ---------------------------------------------------------------- scoring one case

@dataclass
class AgenticResult:
    id: str
    kind: str
    status: str  # passed | failed | skipped
    checks: dict[str, bool | None]  # each outcome checked; None: not asked of this case
    got: dict
    detail: str
    reason: str | None
    seconds: float
    tags: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_json(self) -> dict:
        return asdict(self)


def _same_file(got: str, want: str) -> bool:
    return Path(str(got)).name == Path(want).name


def _check_answer(case: AgenticCase, ans: Answer) -> dict[str, bool | None]:
    ex = case.expect
    checks: dict[str, bool | None] = {"cause": (ans.cause in case.causes) if case.causes else None}
    if "first_failure_rank" in ex:
        checks["rank"] = ans.first_failure_rank == ex["first_failure_rank"]
    if "odd_ranks" in ex:
        checks["odd_ranks"] = sorted(set(ans.odd_ranks or [])) == sorted(set(ex["odd_ranks"]))
    if "location" in ex:
        loc = ans.location or {}
        want = ex["location"]
        line = loc.get("line")
        right = {str(want["line"])} | ({str(want["branch"]["line"])} if want.get("branch") else set())
        checks["line"] = _same_file(loc.get("file", ""), want["file"]) and str(line) in right
    return checks


def repo_changes(case: AgenticCase, ws: Workspace) -> tuple[list[str], list[str]]:
    """(files of repo/ changed, added or removed since the workspace was made, those outside may_change)."""
    after = tree_digest(ws.repo)
    changed = sorted(k for k in set(after) | set(ws.repo_before) if after.get(k) != ws.repo_before.get(k))
    return changed, [k for k in changed if k not in case.expect.get("may_change", [])]


def _check_fix(case: AgenticCase, ws: Workspace) -> tuple[dict[str, bool | None], str]:
    changed, stray = repo_changes(case, ws)
    r = run_torchrun(case.job["program"], case.nproc, case.job_args, timeout=case.job_timeout, cwd=ws.repo)
    done = finished_ranks(r.output)
    ran = succeeded(r) and set(done) == set(range(case.nproc))
    in_sync = ran and len(set(done.values())) == 1
    how = "timed out" if r.timed_out else f"exit {r.returncode}"
    detail = (f"rerun {how}, {len(done)}/{case.nproc} ranks printed DISTDOCTOR_OK"
              + (f", checksums {'equal' if in_sync else 'differ: ' + ' '.join(sorted(set(done.values())))}"
                 if done else "")
              + f"; changed: {', '.join(changed) or 'nothing'}" + (f" (outside may_change: {', '.join(stray)})"
                                                                   if stray else ""))
    if not ran:
        from distdoctor.evals.e2e import last_error

        detail += " — " + last_error(r.output)[:160]
    return {"rerun": ran, "in_sync": in_sync, "scope": bool(changed) and not stray}, detail


def skip_reason(case: AgenticCase) -> str | None:
    if case.kind == "hang" and not HANG_CLI.is_file():
        return "scripts/hang.py (the hang doctor) is not in this checkout"
    return None


def run_case(case: AgenticCase, responder: AgenticResponder, skill_layout: str | None = None,
             tmp_root: Path | None = None) -> AgenticResult:
    """Make the workspace, let the responder work, score the outcome; never raises for a bad answer."""
    t0 = time.monotonic()
    tags = [case.kind]
    why = skip_reason(case)
    if why:
        return AgenticResult(case.id, case.kind, "skipped", {}, {}, why, None, 0.0, tags)
    with tempfile.TemporaryDirectory(prefix=f"distdoctor-agentic-{case.id}-", dir=tmp_root) as tmp:
        try:
            ws = prepare(case, Path(tmp), skill_layout)
        except Exception as exc:  # a case that cannot be set up is reported, the run goes on
            return AgenticResult(case.id, case.kind, "failed", {}, {}, f"workspace: {exc}"[:300],
                                 "setup failed", time.monotonic() - t0, tags)
        job = None
        try:
            if case.kind == "hang":
                job = start_job(case, ws)
            try:
                ans = responder.respond(case, ws)
            except Exception as exc:  # one responder failure never stops the run
                ans = Answer(None, error=f"responder raised {type(exc).__name__}: {exc}"[:300])
        except AgenticError as exc:
            return AgenticResult(case.id, case.kind, "failed", {}, {}, str(exc), "job setup failed",
                                 time.monotonic() - t0, tags)
        finally:
            if job is not None:
                stop_job(job)
        checks = _check_answer(case, ans)
        got = {"cause": ans.cause, "first_failure_rank": ans.first_failure_rank, "odd_ranks": ans.odd_ranks,
               "location": ans.location, "patch": ans.patch}
        detail = f"cause {ans.cause or '(none)'} (expected {' or '.join(case.causes) or '-'})"
        if "rank" in checks:
            detail += f", first failure rank {ans.first_failure_rank} (expected {case.expect['first_failure_rank']})"
        if "odd_ranks" in checks:
            detail += f", odd ranks {ans.odd_ranks} (expected {case.expect['odd_ranks']})"
        if "line" in checks:
            loc = ans.location or {}
            want = case.expect["location"]
            detail += f", at {loc.get('file')}:{loc.get('line')} (expected {want['file']}:{want['line']})"
        if case.kind == "fix":
            fix_checks, fix_detail = _check_fix(case, ws)
            checks.update(fix_checks)
            detail += "; " + fix_detail
            required = [fix_checks["rerun"], fix_checks["in_sync"], fix_checks["scope"]]
        else:
            required = [v for v in checks.values() if v is not None]
        passed = bool(required) and all(required)
        return AgenticResult(case.id, case.kind, "passed" if passed else "failed", checks,
                             {k: v for k, v in got.items() if v is not None}, detail, ans.error,
                             round(time.monotonic() - t0, 2), tags)


def run_all(cases: list[AgenticCase], responder: AgenticResponder, skill_layout: str | None = None,
            progress: bool = True, jobs: int = 1) -> list[AgenticResult]:
    """Every case (in `jobs` threads, each case in its own workspace and job), in the cases' order."""
    from concurrent.futures import ThreadPoolExecutor

    def one(c: AgenticCase) -> AgenticResult:
        if progress:
            print(f"[agentic] {c.id} ({c.kind})", file=sys.stderr, flush=True)
        r = run_case(c, responder, skill_layout)
        if progress:
            print(f"[agentic] {c.id}: {r.status} — {r.detail[:200]}", file=sys.stderr, flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, cases))
