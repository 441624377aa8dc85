"""Shared by the stand-in agents of the skill ablation: solve a task with the skill's tools when the skill
is there, or the way an agent without it would (read the end of the log, guess from keywords, change nothing).

A task is {kind, words, logs: [paths], repo: path|None, pid: int|None, log: text}. Both paths are real
work: the skill path runs the skill's own scripts from the workspace copy (never this checkout's).
"""
import json
import re
import subprocess
import sys
from pathlib import Path

KEYWORDS = [  # what a reader of the last lines would guess
    (r"out of memory|Cannot allocate|DefaultCPUAllocator", "oom_one_rank"),
    (r"address already in use|EADDRINUSE", "port_in_use"),
    (r"Connection closed by peer|Connection reset", "peer_died_first"),
    (r"ProcessGroupNCCL|no GPUs found|NCCL", "nccl_without_cuda"),
    (r"timed out|[Tt]imeout", "collective_timeout"),
]


def tail(path: Path, n: int = 4000) -> str:
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(0, f.tell() - n * 120))
        return f.read().decode("utf-8", errors="replace")


def naive(task: dict) -> dict:
    files = [f for p in task.get("logs", []) for f in ([Path(p)] if Path(p).is_file() else sorted(Path(p).rglob("*")))
             if f.is_file()]
    text = task.get("log", "") + "".join(tail(f) for f in files) + task.get("words", "")
    cause = next((c for pat, c in KEYWORDS if re.search(pat, text)), "collective_timeout")
    ranks = re.findall(r"\[rank(\d+)\]", text)
    return {"cause": cause, "first_failure_rank": int(ranks[-1]) if ranks else None}


def _run(args: list, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd)


def with_skill(task: dict, skill: Path) -> dict:
    scripts = skill.parent / "scripts"
    if task["kind"] == "hang":
        if not (scripts / "hang.py").is_file():
            return naive(task)
        r = _run([scripts / "hang.py", "--pid", task["pid"], "--json"])
        d = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        causes = [c["id"] for c in d.get("causes", [])]
        return {"cause": causes[0] if causes else None, "odd_ranks": d.get("odd_ranks"), "location": d.get("location")}
    if task["kind"] == "fix":
        listed = json.loads(_run([scripts / "patch_backend.py", "--list", "--json"]).stdout)
        catalog = {p["id"]: p["cause"] for p in (listed.get("patches", []) if isinstance(listed, dict) else listed)}
        out = _run([scripts / "patch_backend.py", task["repo"]]).stdout
        applied = [w for ln in out.splitlines() for w in ln.split()[1:2] if w in catalog]
        return {"cause": catalog[applied[0]] if applied else None, "patch": applied[0] if applied else None}
    args = [scripts / "diagnose.py", *(task.get("logs") or ["-"]), "--json", "--quiet"]
    if task.get("words"):
        args += ["--context", task["words"]]
    r = subprocess.run([sys.executable, *map(str, args)], input=task.get("log", ""), capture_output=True, text=True,
                       timeout=300)
    d = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    causes = [c["id"] for c in d.get("causes", [])]
    ff = d.get("first_failure") or {}
    return {"cause": causes[0] if causes else None, "causes": causes, "first_failure_rank": ff.get("rank")}


def task_from_payload(p: dict, cwd: Path) -> dict:
    """The stdin JSON of --agent-cmd: an agentic case, or a cases.jsonl case ({id, log, context, files?})."""
    logs = [str(cwd / x) for x in p.get("logs", [])]
    if "kind" not in p and p.get("log"):
        logs = [str(cwd / "logs")]
    return {"kind": p.get("kind", "short_log"), "words": p.get("words", p.get("context", "")), "logs": logs,
            "repo": str(cwd / p["repo"]) if p.get("repo") else None, "pid": (p.get("job") or {}).get("pid"),
            "log": "" if logs else p.get("log", "")}
