#!/usr/bin/env python3
"""Stand-in for the agent CLIs (claude, codex, gemini, opencode), called as that name (a link, or
$AGENT_CLI_NAME from a wrapper).

It checks the arguments it receives against the real CLI's flags (an unknown flag or a missing headless
flag exits 2, as the real ones do), finds the skill where that CLI looks for project skills, does the
work (tests/agents/_solver.py: the skill's scripts when the skill is there, a guess when not) and answers
in that CLI's real output format. It records what it saw in $AGENT_CLI_SPY/<name>-<n>.json when set.
"""
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _solver import naive, with_skill  # noqa: E402

NAME = os.environ.get("AGENT_CLI_NAME") or Path(sys.argv[0]).name
SKILL_DIRS = {"claude": ".claude/skills/distdoctor", "codex": ".agents/skills/distdoctor",
              "gemini": ".gemini/skills/distdoctor", "opencode": ".opencode/skills/distdoctor"}
# the flags each real CLI accepts that a headless run may use (from its --help), value-taking ones True
FLAGS = {
    "claude": {"-p": False, "--print": False, "--output-format": True, "--permission-mode": True,
               "--model": True, "--max-turns": True, "--add-dir": True, "--append-system-prompt": True},
    "codex": {"--json": False, "--skip-git-repo-check": False, "--ephemeral": False, "--sandbox": True, "-s": True,
              "--model": True, "-m": True, "--cd": True, "-C": True, "--output-last-message": True, "-o": True},
    "gemini": {"-p": True, "--prompt": True, "--output-format": True, "-o": True, "--approval-mode": True,
               "--skip-trust": False, "--yolo": False, "-y": False, "--model": True, "-m": True},
    "opencode": {"--format": True, "--auto": False, "--model": True, "-m": True, "--agent": True, "--dir": True},
}
CHOICES = {"--output-format": {"text", "json", "stream-json"}, "--permission-mode": {
    "acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan"},
    "--sandbox": {"read-only", "workspace-write", "danger-full-access"},
    "--approval-mode": {"default", "auto_edit", "yolo", "plan"}, "--format": {"default", "json"}}


def die(msg: str) -> None:
    print(f"{NAME}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    if NAME == "codex":
        if not argv or argv[0] != "exec":
            die("headless runs need the `exec` subcommand")
        argv = argv[1:]
    if NAME == "opencode":
        if not argv or argv[0] != "run":
            die("headless runs need the `run` subcommand")
        argv = argv[1:]
    opts, pos, i = {}, [], 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and a != "-":
            if a not in FLAGS[NAME]:
                die(f"unknown option '{a}'")
            if FLAGS[NAME][a]:
                if i + 1 >= len(argv):
                    die(f"option '{a}' needs a value")
                if a in CHOICES and argv[i + 1] not in CHOICES[a]:
                    die(f"invalid choice {argv[i + 1]!r} for {a}")
                opts[a] = argv[i + 1]
                i += 2
                continue
            opts[a] = True
        else:
            pos.append(a)
        i += 1
    return opts, pos


def main() -> None:
    opts, pos = parse(sys.argv[1:])
    if NAME == "claude":
        if "-p" not in opts or opts.get("--output-format") != "json" or len(pos) != 1:
            die("expected -p PROMPT --output-format json")
        prompt = pos[0]
    elif NAME == "gemini":
        if opts.get("--output-format") != "json" or not isinstance(opts.get("-p"), str):
            die("expected -p PROMPT --output-format json")
        prompt = opts["-p"]
    elif NAME == "codex":
        if "--json" not in opts or len(pos) != 1:
            die("expected exec --json PROMPT")
        prompt = pos[0]
    else:
        if opts.get("--format") != "json" or not pos:
            die("expected run --format json MESSAGE")
        prompt = " ".join(pos)
    stdin = "" if sys.stdin.isatty() else sys.stdin.read()
    if stdin:
        die("a headless run here gets its prompt as an argument, not on stdin")
    if "Name the cause with one of these ids" not in prompt or '{"cause":' not in prompt:
        die("the prompt does not say which ids to choose from and how to answer")
    cwd = Path.cwd()
    m = re.search(r"torchrun process id (\d+)", prompt)
    kind = "hang" if m else ("fix" if "Make `" in prompt else "logs")
    has_logs = kind == "logs" and any(f.is_file() and f.stat().st_size for f in (cwd / "logs").rglob("*"))
    logs = [str(cwd / "logs")] if has_logs else []
    task = {"kind": kind, "words": prompt.splitlines()[0], "logs": logs, "repo": str(cwd / "repo"),
            "pid": int(m.group(1)) if m else None, "log": ""}
    skill = cwd / SKILL_DIRS[NAME] / "SKILL.md"
    answer = with_skill(task, skill) if skill.is_file() else naive(task)
    spy = os.environ.get("AGENT_CLI_SPY")
    if spy:
        n = len(list(Path(spy).glob(f"{NAME}-*.json")))
        Path(spy, f"{NAME}-{n}.json").write_text(json.dumps({"argv": sys.argv[1:], "skill": skill.is_file(),
                                                             "cwd": str(cwd)}))
    text = "I looked at the workspace.\n" + json.dumps(answer)
    if NAME == "claude":
        print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1200,
                          "num_turns": 3, "result": text, "session_id": "0000", "total_cost_usd": 0.0}))
    elif NAME == "codex":
        for ev in ({"type": "thread.started", "thread_id": "0000"}, {"type": "turn.started"},
                   {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "thinking"}},
                   {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": text}},
                   {"type": "turn.completed", "usage": {"input_tokens": 1, "cached_input_tokens": 0,
                                                         "output_tokens": 1}}):
            print(json.dumps(ev))
    elif NAME == "gemini":
        print(json.dumps({"session_id": "0000", "response": text, "stats": {"models": {}}}, indent=2))
    else:
        ids = {"sessionID": "ses_0", "messageID": "msg_0"}
        for ev in ({"type": "step_start", "timestamp": 1, "sessionID": "ses_0",
                    "part": {"id": "prt_0", **ids, "type": "step-start"}},
                   {"type": "text", "timestamp": 2, "sessionID": "ses_0",
                    "part": {"id": "prt_1", **ids, "type": "text", "text": text, "time": {"start": 1, "end": 2}}},
                   {"type": "step_finish", "timestamp": 3, "sessionID": "ses_0",
                    "part": {"id": "prt_2", **ids, "type": "step-finish", "reason": "stop",
                             "tokens": {"input": 1, "output": 1, "reasoning": 0, "cache": {"read": 0, "write": 0}}}}):
            print(json.dumps(ev))


main()
