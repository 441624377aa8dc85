"""The eval harness itself, scored with fake agents (tests/agents/*.py) so the score is seen to move."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from distdoctor.evals import cli
from distdoctor.evals.cases import CaseError, load_cases
from distdoctor.evals.responders import parse_agent_output

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ROOT / "tests" / "agents"
PY = shlex.quote(sys.executable)

CASES = [
    {"id": "a-port", "log": "RuntimeError: The server socket has failed to listen on any local network address. "
     "port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
     "source": "https://example.invalid/issue/1", "expected_cause": "port_in_use", "tags": ["public"]},
    {"id": "b-nccl", "log": "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
     "source": "produced here: test", "expected_cause": "nccl_without_cuda", "expected_patch": "gloo_backend"},
    {"id": "c-words", "log": "", "context": "I doubled the GPUs and the epoch time did not change at all",
     "source": "words: hand-written", "expected_cause": "single_process_launch", "tags": ["words-only"]},
    # shell-hostile text: must only ever travel on stdin, never through a shell
    {"id": "d-hostile", "log": "$(touch PWNED_A) `touch PWNED_B`; touch PWNED_C && echo ' \" \\",
     "context": "'; touch PWNED_D; echo '", "source": "words: hostile", "expected_cause": "launcher_args"},
]


def write_cases(path: Path, cases: list[dict] = CASES) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "evals" / "run_evals.py"), *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def agent(name: str, *args: str | Path) -> str:
    return " ".join([PY, shlex.quote(str(AGENTS / f"{name}.py")), *(shlex.quote(str(a)) for a in args)])


def score_json(tmp_path: Path, *extra: str) -> tuple[int, dict, str]:
    r = run_cli("--cases", str(tmp_path / "cases.jsonl"), "--json", "--results", str(tmp_path / "R.md"), *extra)
    out = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    return r.returncode, out, r.stderr


def test_score_moves_with_the_agent(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl")
    rc, right, _ = score_json(tmp_path, "--agent-cmd", agent("right", cases), "-j", "4")
    assert rc == 0 and right["top1"] == 1.0 and right["top3"] == 1.0 and right["n"] == 4
    assert all(c["top1_ok"] for c in right["cases"])
    md = (tmp_path / "R.md").read_text(encoding="utf-8")
    assert "| `port_in_use` | 1 | 1/1 (100.0%)" in md and "## Per cause" in md

    rc, line, _ = score_json(tmp_path, "--agent-cmd", agent("right_line", cases))
    assert line["top1"] == 1.0

    rc, wrong, _ = score_json(tmp_path, "--agent-cmd", agent("wrong", cases), "--min-top1", "0.5")
    assert rc == 1 and wrong["top1"] == 0.0 and wrong["top3"] == 0.0
    pairs = {(c["expected"], c["got"]) for c in wrong["confusions"]}
    assert ("port_in_use", "fabric_fault") in pairs and len(wrong["confusions"]) == 4

    rc, second, _ = score_json(tmp_path, "--agent-cmd", agent("second", cases))
    assert second["top1"] == 0.0 and second["top3"] == 1.0


def test_hang_crash_garbage_score_wrong_and_never_stop_the_run(tmp_path: Path) -> None:
    write_cases(tmp_path / "cases.jsonl")
    rc, hung, err = score_json(tmp_path, "--agent-cmd", agent("hang"), "--timeout", "1.5", "-j", "4")
    assert rc == 0 and hung["top1"] == 0.0 and hung["n"] == 4
    assert all("timed out after 1.5s" in c["reason"] for c in hung["cases"])
    assert all(c["seconds"] < 10 for c in hung["cases"])

    rc, crash, _ = score_json(tmp_path, "--agent-cmd", agent("crash"))
    assert crash["top1"] == 0.0
    assert all("exited with status 1" in c["reason"] and "crashed on purpose" in c["reason"] for c in crash["cases"])

    rc, garbage, _ = score_json(tmp_path, "--agent-cmd", agent("garbage"))
    assert garbage["top1"] == 0.0 and all("no JSON answer" in c["reason"] for c in garbage["cases"])

    rc, missing, _ = score_json(tmp_path, "--agent-cmd", str(tmp_path / "no-such-agent"))
    assert missing["top1"] == 0.0 and all("could not start" in c["reason"] for c in missing["cases"])


def test_agent_gets_only_the_case_and_skill_and_no_shell(tmp_path: Path) -> None:
    write_cases(tmp_path / "cases.jsonl")
    spy = tmp_path / "spy"
    spy.mkdir()
    rc, out, _ = score_json(tmp_path, "--agent-cmd", agent("spy", spy))
    seen = {p.stem: json.loads(p.read_text()) for p in spy.glob("*.json")}
    assert set(seen) == {c["id"] for c in CASES}
    for cid, got in seen.items():
        assert set(got["stdin"]) == {"id", "log", "context"}, "the expected answer must never reach the agent"
        assert Path(got["skill"]).is_absolute() and got["skill"].endswith("SKILL.md")
    assert seen["d-hostile"]["stdin"]["log"] == CASES[3]["log"]
    # the hostile case text was never interpreted by a shell, neither here nor in the agent's cwd
    assert not list(tmp_path.glob("PWNED*")) and not list(ROOT.glob("PWNED*"))


def test_recorded_responses(tmp_path: Path) -> None:
    write_cases(tmp_path / "cases.jsonl")
    rec = tmp_path / "rec.jsonl"
    rec.write_text("\n".join([
        json.dumps({"id": "a-port", "cause": "port_in_use"}),
        json.dumps({"id": "b-nccl", "cause": "nccl_without_cuda", "patch": "gloo_backend"}),
        json.dumps({"id": "c-words", "output": "thinking...\nCAUSE: single_process_launch"}),
    ]) + "\n")
    rc, out, _ = score_json(tmp_path, "--responses", str(rec))
    assert out["top1"] == 0.75 and out["patch_accuracy"] == 1.0
    missing = [c for c in out["cases"] if c["id"] == "d-hostile"][0]
    assert missing["reason"] == "no recorded answer for this case"
    rc, out, _ = score_json(tmp_path, "--responses", str(rec), "--min-top1", "0.8")
    assert rc == 1
    rc, out, _ = score_json(tmp_path, "--responses", str(rec), "--min-top1", "0.75")
    assert rc == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a-port", "cause": "x"}\n{"id": 3}\n')
    r = run_cli("--cases", str(tmp_path / "cases.jsonl"), "--responses", str(bad), "--no-results")
    assert r.returncode == 2 and "bad.jsonl:2: field id" in r.stderr


@pytest.mark.parametrize("content, expect", [
    ('{"id": "x", "log": "boom", "source": "s"}\n', "cases.jsonl:1: field expected_cause: 'expected_cause' is a required"),
    (json.dumps(CASES[0]) + '\n\n{"id": "y", "log": 5, "source": "s", "expected_cause": "port_in_use"}\n',
     "cases.jsonl:3: field log: 5 is not of type 'string'"),
    (json.dumps(CASES[0]) + "\n{not json\n", "cases.jsonl:2: not valid JSON"),
    (json.dumps(CASES[0]) + "\n" + json.dumps(CASES[0]) + "\n", "cases.jsonl:2: field id: duplicate id 'a-port'"),
    ('{"id": "z", "log": "", "source": "s", "expected_cause": "port_in_use"}\n',
     "cases.jsonl:1: field log: a case needs a non-empty log or a non-empty context"),
    ('{"id": "z", "log": "x", "source": "s", "expected_cause": "port_in_use", "answer": 1}\n',
     "cases.jsonl:1: field (case): Additional properties are not allowed ('answer' was unexpected)"),
    ('{"id": "z", "log": "x", "source": "s", "expected_cause": "no_such_cause"}\n',
     "cases.jsonl:1: field expected_cause: 'no_such_cause' is not a cause id"),
])
def test_malformed_case_file_names_line_and_field(tmp_path: Path, content: str, expect: str) -> None:
    p = tmp_path / "cases.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(CaseError) as exc:
        from distdoctor.knowledge import load_taxonomy

        load_cases(p, set(load_taxonomy()))
    assert expect in str(exc.value) and "\n" not in str(exc.value)


def test_per_rank_files_reach_the_responders(tmp_path: Path) -> None:
    """A case recorded with torchrun --log-dir carries its per-rank files; the console alone names no cause."""
    logs = ROOT / "tests" / "data" / "logs"
    folder = logs / "gen_rank0_allreduce_logdir.d"
    files = {f.relative_to(folder).as_posix(): f.read_text(encoding="utf-8") for f in sorted(folder.rglob("*.log"))}
    case = {"id": "logdir", "log": (logs / "gen_rank0_allreduce_logdir.log").read_text(encoding="utf-8"),
            "files": files, "source": "produced here: test", "expected_cause": "rank_conditional_collective"}
    write_cases(tmp_path / "cases.jsonl", [case])
    rc, out, err = score_json(tmp_path)
    assert rc == 0 and out["top1"] == 1.0, (err, out)
    assert out["cases"][0]["got"] == "rank_conditional_collective"
    # an agent sees the same files, by relative path
    spy = tmp_path / "spy"
    spy.mkdir()
    score_json(tmp_path, "--agent-cmd", agent("spy", spy))
    got = json.loads((spy / "logdir.json").read_text())["stdin"]
    assert set(got) == {"id", "log", "context", "files"} and got["files"] == files
    # without the files, the console's torchrun summary alone is not enough
    write_cases(tmp_path / "cases.jsonl", [{k: v for k, v in case.items() if k != "files"}])
    assert score_json(tmp_path)[1]["cases"][0]["got"] != "rank_conditional_collective"


def test_case_file_paths_must_stay_inside_their_folder(tmp_path: Path) -> None:
    bad = {"id": "x", "log": "boom", "files": {"../etc/passwd": "x"}, "source": "s", "expected_cause": "port_in_use"}
    p = write_cases(tmp_path / "cases.jsonl", [bad])
    with pytest.raises(CaseError) as exc:
        load_cases(p)
    assert "cases.jsonl:1: field files" in str(exc.value)


def test_cli_bad_inputs_exit_2_with_one_line(tmp_path: Path) -> None:
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\x00\x01\x02garbage")
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(json.dumps(CASES[0]).encode() + b'\n{"id": "\xe9"}\n')
    for args, msg in [(["--cases", str(tmp_path / "nope.jsonl")], "no such file"),
                      (["--cases", str(binary)], "binary file"),
                      (["--cases", str(latin)], "latin.jsonl:2: not UTF-8"),
                      (["--cases", str(tmp_path)], "not a regular file"),
                      (["--min-top1", "7"], "not a fraction"),
                      (["--agent-cmd", ""], "--agent-cmd is empty")]:
        r = run_cli(*args, "--no-results")
        assert r.returncode == 2, (args, r.stderr)
        assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = run_cli("--help")
    assert r.returncode == 0 and "--agent-cmd" in r.stdout and "--e2e" in r.stdout


def test_parse_agent_output_forms() -> None:
    assert parse_agent_output('{"cause": "port_in_use", "patch": null}').cause == "port_in_use"
    a = parse_agent_output('log {"x": 1}\n{"cause": "a"}\nthen\n{"cause": "b", "causes": ["b", {"id": "c"}]}\n')
    assert a.cause == "b" and a.top3 == ["b", "c"]
    assert parse_agent_output("blah\nCAUSE: `gloo_missing_feature`\n").cause == "gloo_missing_feature"
    assert parse_agent_output("CAUSE: x\nmore text after").cause is None
    assert parse_agent_output('{"causes": [{"id": "q", "score": 3}]}').cause == "q"
    assert parse_agent_output("").error


def test_results_markdown_written_atomically_and_default_path_untouched(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl")
    before = (ROOT / "evals" / "RESULTS.md").read_bytes() if (ROOT / "evals" / "RESULTS.md").exists() else None
    rc = cli.main(["--cases", str(cases), "--agent-cmd", agent("right", cases), "--results",
                   str(tmp_path / "out.md"), "-q"])
    assert rc == 0
    md = (tmp_path / "out.md").read_text(encoding="utf-8")
    assert "top-1" in md and "## Confusions" in md and "## Every case" in md and "words-only" in md
    assert not list(tmp_path.glob(".out.md.*"))
    after = (ROOT / "evals" / "RESULTS.md").read_bytes() if (ROOT / "evals" / "RESULTS.md").exists() else None
    assert before == after


def test_a_real_agent_command_scores_like_the_builtin(tmp_path: Path) -> None:
    """tests/agents/diagnose_cli.py wraps scripts/diagnose.py as an external agent: on the same cases it must
    get exactly the answers of the built-in responder (the harness adds nothing and loses nothing)."""
    pytest.importorskip("distdoctor.diagnose", reason="the diagnosis engine is not there yet")
    from distdoctor.evals.cases import load_cases as load
    from distdoctor.evals.responders import BuiltinResponder

    picked = [c for c in load(ROOT / "evals" / "cases.jsonl") if c.expected_cause in ("port_in_use", "peer_died_first")]
    lines = []
    for c in picked[:10]:
        d = {"id": c.id, "log": c.log, "source": c.source, "expected_cause": c.expected_cause}
        if c.context:
            d["context"] = c.context
        lines.append(d)
    write_cases(tmp_path / "cases.jsonl", lines)
    rc, agent_out, err = score_json(tmp_path, "--agent-cmd", agent("diagnose_cli"), "-j", "4")
    assert rc == 0, err
    builtin = BuiltinResponder()
    for res in agent_out["cases"]:
        case = next(c for c in picked if c.id == res["id"])
        assert res["got"] == builtin.answer(case).cause, res
