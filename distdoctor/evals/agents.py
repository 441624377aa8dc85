"""Presets for real agent CLIs: turn a case into a prompt, run the CLI headless in the case's workspace
with the skill installed where that CLI looks for project skills, and read its answer.

| preset   | command (in the workspace)                                                           | skill folder                 | output read |
|----------|--------------------------------------------------------------------------------------|------------------------------|-------------|
| claude   | `claude -p PROMPT --output-format json --permission-mode bypassPermissions`          | .claude/skills/distdoctor/   | `{"type": "result", "result": TEXT, "is_error": ...}` |
| codex    | `codex exec --json --skip-git-repo-check --ephemeral --sandbox danger-full-access PROMPT` | .agents/skills/distdoctor/ | JSONL events; the last `item.completed` with an `agent_message` item |
| gemini   | `gemini -p PROMPT --output-format json --approval-mode yolo --skip-trust`            | .gemini/skills/distdoctor/   | `{"response": TEXT, "stats": ...}` or `{"error": {...}}` |
| opencode | `opencode run --format json --auto PROMPT`                                           | .opencode/skills/distdoctor/ | JSONL events; the `text` parts |

Flags and formats were read from each CLI's `--help` (claude 2.1.197, codex-cli 0.169.0, gemini 0.61.0,
opencode 1.18.33, installed with `npm install -g @anthropic-ai/claude-code @openai/codex
@google/gemini-cli opencode-ai`) and their documentation. The final answer text is then read like any
agent's (the last JSON object with "cause", or a last line `CAUSE: <id>`). The prompt is built from the
same payload an --agent-cmd gets on stdin; the CLI gets nothing on stdin.
"""

from __future__ import annotations

import json
from pathlib import Path

from distdoctor import paths
from distdoctor.evals.responders import AgentResponder, Answer, _json_objects, parse_agent_output

PRESETS = ("claude", "codex", "gemini", "opencode")


def argv_for(preset: str, binary: str, text: str) -> list[str]:
    if preset == "claude":
        return [binary, "-p", text, "--output-format", "json", "--permission-mode", "bypassPermissions"]
    if preset == "codex":
        return [binary, "exec", "--json", "--skip-git-repo-check", "--ephemeral", "--sandbox", "danger-full-access",
                text]
    if preset == "gemini":
        return [binary, "-p", text, "--output-format", "json", "--approval-mode", "yolo", "--skip-trust"]
    if preset == "opencode":
        return [binary, "run", "--format", "json", "--auto", text]
    raise ValueError(f"unknown agent preset {preset!r} (one of {', '.join(PRESETS)})")


def final_text(preset: str, stdout: str) -> tuple[str | None, str | None]:
    """(the agent's final message, an error) from a CLI's stdout in its own format."""
    objs = _json_objects(stdout)
    if preset == "claude":
        res = [o for o in objs if o.get("type") == "result"]
        if not res:
            return None, "no claude result object in output"
        r = res[-1]
        if r.get("is_error") or r.get("subtype") not in (None, "success"):
            return None, f"claude reported an error: {str(r.get('result') or r.get('subtype'))[:200]}"
        return str(r.get("result") or ""), None
    if preset == "codex":
        for o in reversed(objs):
            if o.get("type") in ("turn.failed", "error"):
                msg = (o.get("error") or {}).get("message") if isinstance(o.get("error"), dict) else o.get("message")
                return None, f"codex reported an error: {str(msg)[:200]}"
            item = o.get("item") or {}
            if o.get("type") == "item.completed" and item.get("type") == "agent_message":
                return str(item.get("text") or ""), None
        return None, "no codex agent_message in output"
    if preset == "gemini":
        for o in reversed(objs):
            if isinstance(o.get("error"), dict):
                return None, f"gemini reported an error: {str(o['error'].get('message'))[:200]}"
            if "response" in o:
                return str(o.get("response") or ""), None
        return None, "no gemini response object in output"
    if preset == "opencode":
        texts = []
        for o in objs:
            if o.get("type") == "error":
                err = o.get("error")
                msg = (err.get("data") or {}).get("message", err.get("name")) if isinstance(err, dict) else err
                return None, f"opencode reported an error: {str(msg)[:200]}"
            part = o.get("part") or {}
            if o.get("type") == "text" and part.get("type") == "text":
                texts.append(str(part.get("text") or ""))
        return ("\n".join(texts), None) if texts else (None, "no opencode text event in output")
    raise ValueError(preset)


def case_prompt(p: dict) -> str:
    """A cases.jsonl case (a short log and/or words) as a prompt; the log is in the workspace too."""
    from distdoctor.evals.agentic import ANSWER_FORMAT, cause_titles

    lines = [p.get("context") or "My distributed PyTorch job failed. What is the cause?"]
    if p.get("log"):
        lines += ["", "The log is in logs/console.log" + (" and the per-rank logs under logs/." if p.get("files")
                                                          else "."), "", "```", p["log"], "```"]
    lines += ["", "Name the cause with one of these ids:"]
    lines += [f"- {k}: {v}" for k, v in cause_titles().items()]
    lines += ["", ANSWER_FORMAT]
    return "\n".join(lines)


class PresetResponder(AgentResponder):
    """One of PRESETS, headless, in a fresh workspace per case with the skill in that CLI's skill folder
    (or, with with_skill=False, without it)."""

    def __init__(self, preset: str, binary: str | None = None, timeout: float = 600.0, with_skill: bool = True):
        if preset not in PRESETS:
            raise ValueError(f"unknown agent preset {preset!r} (one of {', '.join(PRESETS)})")
        self.preset = preset
        self.binary = binary or preset
        super().__init__(self.binary, timeout=timeout, skill=paths.SKILL, skill_layout=preset, with_skill=with_skill)
        self.name = f"agent preset: {preset} ({self.binary})"

    def command(self, payload: dict) -> tuple[list[str], str]:
        from distdoctor.evals.agentic import prompt

        text = prompt(payload) if "kind" in payload else case_prompt(payload)
        return argv_for(self.preset, str(Path(self.binary)) if "/" in self.binary else self.binary, text), ""

    def parse(self, text: str) -> Answer:
        final, err = final_text(self.preset, text)
        if final is None:
            return Answer(None, error=err)
        return parse_agent_output(final)
