"""Agentic eval cases: workspaces scored by outcome (large logs, live hangs, fixes), the built-in tools on
them, the skill ablation with stand-in agents that follow or ignore the skill, and the agent CLI presets
against a stand-in executable that checks its arguments and answers in each CLI's real output format."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distdoctor.evals import agentic, large_logs
from distdoctor.evals.agents import PRESETS, final_text
from distdoctor.procs import descendants

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "tests" / "agents"
PY = sys.executable

SHORT = [
    {"id": "s-port", "log": "RuntimeError: The server socket has failed to listen on any local network address. "
     "port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
     "source": "https://example.invalid/issue/1", "expected_cause": "port_in_use"},
    {"id": "s-words", "log": "", "context": "I doubled the GPUs and the epoch time did not change at all",
     "source": "words: hand-written", "expected_cause": "single_process_launch"},
]
SMALL_LARGE = """id: t-large-peer
kind: large_log
words: One of 16 ranks died; which one first, and why? The console is logs/train.log.
source: test copy of large-peer-died-64 at a few MB
logs: {recording: rank_raises_4, ranks: 16, size_mb: 3, odd_rank: 11, bury: 0.8, seed: 7}
expect: {cause: peer_died_first, first_failure_rank: 11}
"""


def run_cli(*args: str, timeout: float = 600) -> tuple[int, dict, str]:
    r = subprocess.run([PY, str(ROOT / "evals" / "run_evals.py"), *args, "--json", "-q", "--no-results"],
                       capture_output=True, text=True, timeout=timeout)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}), r.stderr[-4000:]


def small_suite(tmp: Path, fix: bool = True) -> tuple[Path, Path]:
    cases = tmp / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in SHORT), encoding="utf-8")
    d = tmp / "agentic"
    d.mkdir()
    (d / "t-large-peer.yaml").write_text(SMALL_LARGE, encoding="utf-8")
    if fix:
        (d / "fix-ddp-laptop.yaml").write_text((ROOT / "evals/agentic/fix-ddp-laptop.yaml").read_text())
    return cases, d


# ---------------------------------------------------------------- the committed cases

def test_committed_cases_cover_every_kind_and_the_large_logs_are_large() -> None:
    cases = agentic.load_cases()
    kinds = {c.kind for c in cases}
    assert kinds == {"large_log", "hang", "fix"}
    large = [c for c in cases if c.kind == "large_log"]
    assert len(large) >= 5
    for c in large:
        shrink = 0.73 if c.logs.get("layout") == "per_rank" else 1.0  # the split takes the tee prefixes off
        assert 8 <= c.logs["ranks"] <= 64 and c.logs["size_mb"] * shrink >= 100, c.id
        assert (large_logs.RECORDINGS / f"{c.logs['recording']}.log").is_file()
        assert (large_logs.RECORDINGS / f"{c.logs['recording']}.meta.yaml").is_file()
    # recordings are small and committed; the large files are not
    assert all(p.stat().st_size < 64 * 1024 for p in large_logs.RECORDINGS.glob("*.log"))
    tracked = subprocess.run(["git", "ls-files", "evals"], cwd=ROOT, capture_output=True, text=True).stdout
    assert ".cache" not in tracked
    for c in cases:  # a workspace never holds the answer: no expected cause id in what the agent can read
        if c.repo and c.kind == "hang":
            text = (ROOT / c.repo).read_text(encoding="utf-8")
            assert not any(cause in text for cause in c.causes), c.id


@pytest.mark.parametrize("edit, expect", [
    (("kind", "broken"), "field kind: 'broken' is not one of"),
    (("logs", None), "field (case): 'logs' is a required property"),
    (("expect", {"cause": "no_such_cause", "first_failure_rank": 1}), "field expect/cause: 'no_such_cause'"),
])
def test_malformed_case_names_file_and_field(tmp_path: Path, edit: tuple, expect: str) -> None:
    import yaml

    data = yaml.safe_load(SMALL_LARGE)
    key, value = edit
    if value is None:
        del data[key]
    else:
        data[key] = value
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    from distdoctor.knowledge import load_taxonomy

    with pytest.raises(agentic.AgenticError) as exc:
        agentic.load_case(p, set(load_taxonomy()))
    assert str(p) in str(exc.value) and expect in str(exc.value) and "\n" not in str(exc.value)


def test_hang_location_must_still_hold_its_line(tmp_path: Path) -> None:
    text = (ROOT / "evals/agentic/hang-loader-lock.yaml").read_text().replace("line: 17", "line: 18")
    p = tmp_path / "drift.yaml"
    p.write_text(text)
    with pytest.raises(agentic.AgenticError, match=r"field expect/location: .*:18 does not hold"):
        agentic.load_case(p)


def test_fix_scope_sees_every_change_outside_may_change(tmp_path: Path) -> None:
    case = agentic.load_case(ROOT / "evals/agentic/fix-sharded-optimizer.yaml")
    ws = agentic.prepare(case, tmp_path, skill_layout="generic")
    assert (ws.repo / "optim.py").is_file() and ws.skill.is_file() and (ws.skill.parent / "scripts").is_dir()
    assert agentic.repo_changes(case, ws) == ([], [])
    (ws.repo / "optim.py").write_text("# fixed\n")
    (ws.repo / "__pycache__").mkdir()
    (ws.repo / "__pycache__" / "optim.cpython-311.pyc").write_bytes(b"x")  # bytecode is not a change
    assert agentic.repo_changes(case, ws) == (["optim.py"], [])
    (ws.repo / "train.py").write_text("# also changed\n")
    (ws.repo / "README.md").unlink()
    (ws.repo / "notes.txt").write_text("scratch")
    assert agentic.repo_changes(case, ws) == (["README.md", "notes.txt", "optim.py", "train.py"],
                                              ["README.md", "notes.txt", "train.py"])


# ---------------------------------------------------------------- large logs

def test_large_log_is_real_lines_renumbered_with_the_first_failure_buried(tmp_path: Path) -> None:
    spec = large_logs.Spec("shard_index_4", ranks=16, size_mb=4, odd_rank=11, bury=0.7, seed=3)
    path = large_logs.ensure("t-shard", spec, cache=tmp_path)
    data = path.read_bytes()
    assert len(data) >= 4 * 1024 * 1024
    root = data.find(b"[rank11]: IndexError")
    assert root > 0.65 * len(data), "the first failure is buried deep"
    assert b"[rank3]: IndexError" not in data  # the recorded failing rank 3 became rank 11
    ranks = {int(x) for x in __import__("re").findall(rb"^\[default(\d+)\]:", data, flags=__import__("re").M)}
    assert ranks == set(range(16))
    assert data.count(b"Traceback") > 10  # the echoes of the other ranks
    mtime = path.stat().st_mtime_ns
    assert large_logs.ensure("t-shard", spec, cache=tmp_path) == path and path.stat().st_mtime_ns == mtime
    from distdoctor.diagnose import diagnose_paths

    t0 = time.monotonic()
    d = diagnose_paths([str(path)])
    assert d["causes"][0]["id"] == "peer_died_first" and d["first_failure"]["rank"] == 11
    assert time.monotonic() - t0 < 30


def test_per_rank_layout_is_one_file_per_rank_without_the_tee_prefix(tmp_path: Path) -> None:
    spec = large_logs.Spec("rank_raises_4", ranks=8, size_mb=1, odd_rank=5, bury=0.5, layout="per_rank")
    folder = large_logs.ensure("t-split", spec, cache=tmp_path)
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([f"rank_{r}.log" for r in range(8)] + ["launcher.log"])
    five = (folder / "rank_5.log").read_text()
    assert "[rank5]: ValueError: bad batch" in five and "[default" not in five
    assert "ValueError" not in (folder / "rank_2.log").read_text()  # the recorded rank 2 is rank 5 here
    from distdoctor.diagnose import diagnose_paths

    d = diagnose_paths([str(folder)])
    assert d["causes"][0]["id"] == "peer_died_first" and d["first_failure"]["rank"] == 5


# ---------------------------------------------------------------- hang mechanics

class _Watcher:
    """A responder that looks at the live job: the torchrun pid and its ranks must exist while it works."""

    name = "watcher"

    def __init__(self) -> None:
        self.pids: list[int] = []

    def respond(self, case, ws):
        from distdoctor.evals.responders import Answer

        self.pids = [ws.job_pid, *descendants(ws.job_pid)]
        text = ws.job_log.read_text()
        return Answer("rank_conditional_collective", odd_ranks=[2],
                      location={"file": "agentic_hang_conditional_recv.py", "line": 14}) if "step 2" in text \
            else Answer(None, error="job not started")


@pytest.mark.torchrun
def test_hang_job_runs_while_the_responder_works_and_is_killed_after(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(agentic, "HANG_CLI", Path(__file__))  # run the case whether or not hang.py exists yet
    case = agentic.load_case(ROOT / "evals/agentic/hang-conditional-recv.yaml")
    w = _Watcher()
    res = agentic.run_case(case, w)
    assert res.passed, res.detail
    assert len(w.pids) >= 4  # torchrun and its 3 ranks
    time.sleep(0.5)
    alive = [p for p in w.pids if Path(f"/proc/{p}").exists() and "zombie" not in Path(f"/proc/{p}/status")
             .read_text().lower()]
    assert not alive, f"left running: {alive}"


def test_hang_doctor_answer_is_read_by_its_contract() -> None:
    """scripts/hang.py --json: top-level ranks, odd_ranks, causes [{id, score, evidence}], location {file, line}."""
    out = {"ranks": {"0": {}, "1": {}, "2": {}}, "odd_ranks": [1],
           "causes": [{"id": "collective_timeout", "score": 3.0, "evidence": ["rank 1 not in all_reduce"]},
                      {"id": "rank_conditional_collective", "score": 1.0, "evidence": []}],
           "location": {"file": "/tmp/x/repo/agentic_hang_loader_lock.py", "line": 17}}
    ans = agentic.answer_from_hang(out)
    assert ans.cause == "collective_timeout" and ans.odd_ranks == [1] and ans.location["line"] == 17
    case = agentic.load_case(ROOT / "evals/agentic/hang-loader-lock.yaml")
    assert agentic._check_answer(case, ans) == {"cause": True, "odd_ranks": True, "line": True}
    ans.location = {"file": "agentic_hang_loader_lock.py", "line": 21}  # the outer `with self.lock:`
    assert agentic._check_answer(case, ans)["line"] is False
    assert agentic.answer_from_hang({"ranks": {}, "odd_ranks": [], "causes": []}).error


def test_hang_cases_skip_with_a_reason_when_the_hang_doctor_is_absent(monkeypatch) -> None:
    monkeypatch.setattr(agentic, "HANG_CLI", ROOT / "scripts" / "no_such_hang.py")
    case = agentic.load_case(ROOT / "evals/agentic/hang-loader-lock.yaml")
    res = agentic.run_case(case, agentic.BuiltinTools())
    assert res.status == "skipped" and "scripts/hang.py" in res.detail


# ---------------------------------------------------------------- the built-in tools, from the CLI

MIN_LARGE_PASSED = 5  # measured 5 of 6 on 2026-11-24 (large-rank0-allreduce-32: collective_timeout first)


@pytest.mark.torchrun
def test_e2e_runs_the_agentic_cases_with_the_builtin_tools() -> None:
    # --no-corpus: the real-log corpus is scored by tests/test_evals_cases.py's default run, not again here
    rc, out, err = run_cli("--e2e", "--no-loop", "--kind", "large_log", "--kind", "hang", "--kind", "fix", "-j", "2",
                           "--no-corpus")
    res = {a["id"]: a for a in out["agentic"]}
    assert set(res) == {c.id for c in agentic.load_cases()}, err
    for a in res.values():
        if a["kind"] == "fix":
            assert a["status"] == "passed", a
    large = [a for a in res.values() if a["kind"] == "large_log"]
    assert sum(a["status"] == "passed" for a in large) >= MIN_LARGE_PASSED, err
    # no time bound: speed is measured by bench/bench_diagnose.py, not by a timed test (a 60 s bound here failed
    # once in a loaded whole-suite run, ci20 of stop 25)
    for a in res.values():
        if a["kind"] == "hang":
            if agentic.HANG_CLI.is_file():
                assert a["status"] != "skipped", a
            else:
                assert a["status"] == "skipped" and "hang.py" in a["detail"]
    assert set(out["kinds"]) == {"large_log", "hang", "fix"}


# ---------------------------------------------------------------- with and without the skill

def _agent(name: str) -> str:
    return f"{shlex.quote(PY)} {shlex.quote(str(AGENTS / name))}"


@pytest.mark.torchrun
def test_ablation_shows_the_skill_followers_lift_and_none_for_an_agent_that_ignores_it(tmp_path: Path) -> None:
    cases, d = small_suite(tmp_path)
    common = ["--cases", str(cases), "--agentic-dir", str(d), "--ablate-skill", "--timeout", "300"]
    rc, follow, err = run_cli("--agent-cmd", _agent("skill_follower.py"), *common)
    assert rc == 0, err
    lift = follow["ablation"]["kinds"]
    assert lift["large_log"]["with_rate"] == 1.0 and lift["large_log"]["without_rate"] == 0.0
    assert lift["fix"]["lift"] == 1.0 and lift["large_log"]["lift"] == 1.0
    gained = {c["id"] for c in follow["ablation"]["cases"] if c["change"] == "gained"}
    assert {"t-large-peer", "fix-ddp-laptop"} <= gained

    # the agent that ignores the skill: the same cases but the fix (its rerun would only show the same failure
    # twice, at a torchrun start each): no lift anywhere
    (d / "fix-ddp-laptop.yaml").unlink()
    rc, ignore, err = run_cli("--agent-cmd", _agent("skill_ignorer.py"), *common)
    assert rc == 0, err
    assert all(k["lift"] in (0, None) for k in ignore["ablation"]["kinds"].values()), ignore["ablation"]
    assert not [c for c in ignore["ablation"]["cases"] if c["change"] != "same"]
    assert ignore["ablation"]["kinds"]["large_log"]["with_rate"] == 0.0


def test_ablation_needs_an_agent() -> None:
    r = subprocess.run([PY, str(ROOT / "evals/run_evals.py"), "--ablate-skill", "--no-results"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--ablate-skill needs --agent-cmd or --agent" in r.stderr


# ---------------------------------------------------------------- agent CLI presets

def _stand_in(bin_dir: Path, name: str) -> Path:
    exe = bin_dir / name
    exe.write_text(f"#!/bin/sh\nAGENT_CLI_NAME={name} exec {shlex.quote(PY)} {shlex.quote(str(AGENTS / 'agent_cli.py'))}"
                   ' "$@"\n')
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_runs_the_cli_headless_with_the_skill_where_it_looks(tmp_path: Path, preset: str) -> None:
    cases, d = small_suite(tmp_path, fix=False)
    (tmp_path / "bin").mkdir()
    exe = _stand_in(tmp_path / "bin", preset)
    spy = tmp_path / "spy"
    spy.mkdir()
    os.environ["AGENT_CLI_SPY"] = str(spy)
    try:
        rc, out, err = run_cli("--agent", preset, "--agent-bin", str(exe), "--cases", str(cases), "--agentic-dir",
                               str(d), "--ablate-skill", "--timeout", "120")
    finally:
        del os.environ["AGENT_CLI_SPY"]
    assert rc == 0, err
    # every answer was read (an agent may still name no cause: that is its answer, not a harness failure)
    assert all(c["reason"] in (None, "the agent's answer names no cause") for c in out["cases"]), out["cases"]
    ab = out["ablation"]["kinds"]
    assert ab["large_log"]["with_rate"] == 1.0 and ab["large_log"]["without_rate"] == 0.0, out["ablation"]
    seen = [json.loads(p.read_text()) for p in spy.glob("*.json")]
    assert len(seen) == 6 and sorted(s["skill"] for s in seen) == [False] * 3 + [True] * 3


def test_preset_reports_a_cli_error_and_a_rejected_flag(tmp_path: Path) -> None:
    assert final_text("claude", json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True}))[1]
    assert final_text("gemini", json.dumps({"error": {"type": "Error", "message": "quota", "code": 1}}))[1] \
        .endswith("quota")
    assert final_text("codex", json.dumps({"type": "turn.failed", "error": {"message": "stream closed"}}))[1] \
        .endswith("stream closed")
    assert final_text("opencode", json.dumps({"type": "error", "error": {"name": "APIError",
                                                                          "data": {"message": "no key"}}}))[1] \
        .endswith("no key")
    # the stand-in refuses what the real CLI refuses: a flag it does not have
    r = subprocess.run([str(_stand_in(tmp_path, "claude")), "-p", "x", "--output-format", "yaml"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "invalid choice" in r.stderr
