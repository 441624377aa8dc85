"""Responders: whatever answers a case. The built-in diagnosis, an external agent command, or recorded answers.

An answer is a cause id (top-1), optionally a ranked list of causes (for top-3) and a patch id.
An agent's stdout is parsed from its last JSON object with a "cause" key, else from a last line
`CAUSE: <id>`. Anything that goes wrong (timeout, crash, garbage) becomes an Answer with no cause
and a reason: it scores as wrong and never stops the run.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from distdoctor import paths
from distdoctor.evals.cases import Case

CAUSE_LINE = re.compile(r"^\s*CAUSE:\s*`?([A-Za-z0-9_]+)`?\s*$")
MAX_OUTPUT = 1024 * 1024  # bytes of an agent's stdout we keep


@dataclass
class Answer:
    cause: str | None
    ranked: list[str] = field(default_factory=list)  # best first; ranked[0] == cause when both given
    patch: str | None = None
    first_failure_rank: int | None = None
    error: str | None = None  # why there is no usable answer
    odd_ranks: list[int] | None = None  # hang: the ranks not where the others are
    location: dict | None = None  # hang: {"file", "line"} the odd ranks are stuck on
    seconds: float = 0.0
    raw: str = ""

    @property
    def top3(self) -> list[str]:
        out: list[str] = []
        for c in ([self.cause] if self.cause else []) + self.ranked:
            if c and c not in out:
                out.append(c)
        return out[:3]


class Responder(Protocol):
    name: str

    def answer(self, case: Case) -> Answer: ...


# ---------------------------------------------------------------- parsing an agent's answer

def _json_objects(text: str) -> list[dict]:
    """Every top-level JSON object that can be decoded from text, in order."""
    dec = json.JSONDecoder()
    out: list[dict] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            out.append(obj)
        i = text.find("{", end)
    return out


def _as_rank(v: object) -> int | None:
    if isinstance(v, dict):
        v = v.get("rank")
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


def answer_from_dict(obj: dict) -> Answer:
    """An Answer from `{"cause": id, "patch": id?, "causes": [id | {"id": ...}]?, "first_failure_rank": n?}`."""
    cause = obj.get("cause")
    ranked_raw = obj.get("causes") or obj.get("ranked") or []
    ranked: list[str] = []
    if isinstance(ranked_raw, list):
        for c in ranked_raw:
            cid = c.get("id") if isinstance(c, dict) else c
            if isinstance(cid, str):
                ranked.append(cid.strip())
    if isinstance(cause, dict):
        cause = cause.get("id")
    if not isinstance(cause, str) or not cause.strip():
        cause = ranked[0] if ranked else None
        if cause is None:
            return Answer(None, error='answer has no "cause" string')
    patch = obj.get("patch")
    if isinstance(patch, list):
        patch = patch[0] if patch else None
    if isinstance(patch, dict):
        patch = patch.get("id")
    if patch is not None and not isinstance(patch, str):
        patch = None
    ffr = _as_rank(obj.get("first_failure_rank", obj.get("first_failure")))
    return Answer(cause.strip(), ranked, patch, ffr, odd_ranks=_as_ranks(obj.get("odd_ranks")),
                  location=_as_location(obj.get("location")))


def _as_ranks(v: object) -> list[int] | None:
    if not isinstance(v, list):
        return None
    ranks = [_as_rank(x) for x in v]
    return [r for r in ranks if r is not None]


def _as_location(v: object) -> dict | None:
    """{"file", "line"} from a dict or a "file:line" string."""
    if isinstance(v, str) and ":" in v:
        f, _, line = v.rpartition(":")
        v = {"file": f, "line": line}
    if not isinstance(v, dict) or not isinstance(v.get("file"), str):
        return None
    line = _as_rank(v.get("line"))
    return {"file": v["file"], "line": line} if line is not None else None


def parse_agent_output(text: str) -> Answer:
    """Parse an agent's stdout: the last JSON object with a "cause"/"causes" key, else a last `CAUSE: id` line."""
    empty: Answer | None = None
    for obj in reversed(_json_objects(text)):
        if "cause" in obj or "causes" in obj:
            ans = answer_from_dict(obj)
            if ans.cause:
                return ans
            empty = empty or ans
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines:
        m = CAUSE_LINE.match(lines[-1])
        if m:
            return Answer(m.group(1))
    if empty is not None:
        return Answer(None, error="the agent's answer names no cause")
    snippet = " ".join(text.split())[:80]
    return Answer(None, error=f"no JSON answer and no final 'CAUSE: <id>' line in output: {snippet!r}")


# ---------------------------------------------------------------- built-in diagnosis

class BuiltinResponder:
    """The project's own diagnosis engine (distdoctor.diagnose.diagnose_text)."""

    name = "builtin (distdoctor.diagnose)"

    def __init__(self, diagnose: Callable | None = None):
        if diagnose is None:
            from distdoctor.diagnose import diagnose_text as diagnose  # imported late: optional at load time
        self._diagnose = diagnose
        try:
            params = inspect.signature(diagnose).parameters
        except (TypeError, ValueError):
            params = {}
        self._takes_context = "context" in params
        self._takes_files = "files" in params

    def diagnose(self, log: str, context: str = "", files: dict[str, str] | None = None) -> dict:
        if files and self._takes_files:
            return self._diagnose(log, context=context, files=files)
        if files:  # an engine that reads one text: the per-rank files follow the console log
            log = "\n".join([log] + [files[k] for k in sorted(files)])
        if self._takes_context:
            return self._diagnose(log, context=context)
        return self._diagnose(log + ("\n" + context if context else ""))

    def answer(self, case: Case) -> Answer:
        t0 = time.monotonic()
        try:
            result = self.diagnose(case.log, case.context, dict(case.files))
        except Exception as exc:  # a crash of the engine on one case is a wrong answer, not a stopped run
            return Answer(None, error=f"diagnosis raised {type(exc).__name__}: {exc}"[:300],
                          seconds=time.monotonic() - t0)
        ans = answer_from_diagnosis(result)
        ans.seconds = time.monotonic() - t0
        return ans


def answer_from_diagnosis(result: dict) -> Answer:
    """Turn diagnose_text's dict ({"causes": [{"id", "score", ...}], "first_failure", "patch"}) into an Answer."""
    if not isinstance(result, dict):
        return Answer(None, error=f"diagnosis returned {type(result).__name__}, not a dict")
    ranked = [c.get("id") if isinstance(c, dict) else c for c in result.get("causes") or []]
    ranked = [c for c in ranked if isinstance(c, str)]
    if not ranked:
        return Answer(None, error="diagnosis named no cause")
    patch = result.get("patch")
    if isinstance(patch, list):
        patch = patch[0] if patch else None
    if isinstance(patch, dict):
        patch = patch.get("id")
    return Answer(ranked[0], ranked, patch if isinstance(patch, str) else None,
                  _as_rank(result.get("first_failure")))


# ---------------------------------------------------------------- external agent

class AgentResponder:
    """Run CMD once per case: argv from shlex.split (never a shell), the case JSON on stdin,
    DISTDOCTOR_SKILL=<abs path of SKILL.md> in the environment, a timeout that kills its process group.

    With `skill_layout` set (an --ablate-skill run), every case runs in a fresh workspace of its own
    (logs/console.log and the per-rank files, cwd there): `skill_layout` names where the skill is
    installed in it (distdoctor.evals.agentic.SKILL_DIRS); `with_skill=False` installs nothing and
    leaves DISTDOCTOR_SKILL unset."""

    def __init__(self, cmd: str, timeout: float = 120.0, skill: Path = paths.SKILL, cwd: Path | None = None,
                 skill_layout: str | None = None, with_skill: bool = True):
        self.argv = shlex.split(cmd)
        if not self.argv:
            raise ValueError("--agent-cmd is empty")
        self.name = f"agent: {cmd}"
        self.timeout = timeout
        self.skill = Path(skill).resolve()
        self.cwd = cwd
        self.skill_layout = skill_layout
        self.with_skill = with_skill

    # what a preset changes: the command line for one payload, and how its stdout is read
    def command(self, payload: dict) -> tuple[list[str], str]:
        """(argv, stdin text) for one case."""
        return self.argv, json.dumps(payload)

    def parse(self, text: str) -> Answer:
        return parse_agent_output(text)

    def answer(self, case: Case) -> Answer:
        if self.skill_layout is None:
            return self.run(case.payload(), self.cwd, self.skill, case.id)
        import tempfile

        from distdoctor.evals.agentic import install_skill

        with tempfile.TemporaryDirectory(prefix=f"distdoctor-case-{case.id}-") as tmp:
            ws = Path(tmp) / "ws"
            (ws / "logs").mkdir(parents=True)
            (ws / "logs" / "console.log").write_text(case.log, encoding="utf-8")
            for rel, text in case.files:
                (ws / "logs" / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws / "logs" / rel).write_text(text, encoding="utf-8")
            skill = install_skill(ws, self.skill_layout) if self.with_skill else None
            return self.run(case.payload(), ws, skill, case.id)

    def respond(self, case, ws) -> Answer:
        """An agentic case (distdoctor.evals.agentic): the same command, in the case's workspace."""
        from distdoctor.evals.agentic import cause_titles, payload

        return self.run(payload(case, ws, cause_titles()), ws.root, ws.skill, case.id)

    def run(self, payload: dict, cwd: Path | None, skill: Path | None, case_id: str) -> Answer:
        env = {k: v for k, v in os.environ.items() if k != "DISTDOCTOR_SKILL"}
        env["DISTDOCTOR_CASE_ID"] = case_id
        if skill is not None:
            env["DISTDOCTOR_SKILL"] = str(skill)
        if self.skill_layout is not None and not self.with_skill:
            # the skill is absent: this checkout must not reach the agent through the import path either
            kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                    if p and Path(p).resolve() != paths.ROOT.resolve()]
            env["PYTHONPATH"] = os.pathsep.join(kept)
        argv, stdin = self.command(payload)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
        except OSError as exc:
            return Answer(None, error=f"agent could not start: {exc}", seconds=time.monotonic() - t0)
        try:
            out, err = proc.communicate(stdin.encode("utf-8"), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return Answer(None, error=f"agent timed out after {self.timeout:g}s", seconds=time.monotonic() - t0)
        dt = time.monotonic() - t0
        text = out[:MAX_OUTPUT].decode("utf-8", errors="replace")
        if proc.returncode != 0:
            tail = " ".join(err.decode("utf-8", errors="replace").split())[-160:]
            return Answer(None, error=f"agent exited with status {proc.returncode}: {tail}", seconds=dt,
                          raw=text[-2000:])
        ans = self.parse(text)
        ans.seconds, ans.raw = dt, text[-2000:]
        return ans


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


# ---------------------------------------------------------------- recorded answers

class RecordedResponder:
    """Answers recorded in a JSONL file: one object per line with "id" and either the answer fields
    ("cause", "patch", "causes") or "output" (an agent's raw stdout, parsed like a live agent's)."""

    def __init__(self, path: str | Path):
        from distdoctor.evals.cases import CaseError

        p = Path(path)
        self.name = f"recorded: {p}"
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CaseError(f"{p}: no such file") from None
        except UnicodeDecodeError as exc:
            raise CaseError(f"{p}: not UTF-8 (byte {exc.start})") from None
        except OSError as exc:
            raise CaseError(f"{p}: cannot read: {exc.strerror}") from None
        self.answers: dict[str, dict] = {}
        for n, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise CaseError(f"{p}:{n}: not valid JSON (column {exc.colno}): {exc.msg}") from None
            if not isinstance(obj, dict):
                raise CaseError(f"{p}:{n}: expected a JSON object, got {type(obj).__name__}")
            if not isinstance(obj.get("id"), str):
                raise CaseError(f"{p}:{n}: field id: missing or not a string")
            if "output" in obj and not isinstance(obj["output"], str):
                raise CaseError(f"{p}:{n}: field output: not a string")
            self.answers[obj["id"]] = obj

    def answer(self, case: Case) -> Answer:
        obj = self.answers.get(case.id)
        if obj is None:
            return Answer(None, error="no recorded answer for this case")
        if "output" in obj:
            return parse_agent_output(obj["output"])
        return answer_from_dict(obj)
