"""A real (not fake) agent for --agent-cmd: hands the case to the diagnosis CLI and answers with its result.

Reads the case JSON on stdin, runs `scripts/diagnose.py - --json --context <words>` with the log on its stdin
(argv list, no shell), prints {"cause", "causes", "patch"}. Shows that an external agent command is scored
exactly like the built-in responder.
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
case = json.loads(sys.stdin.read())
cmd = [sys.executable, str(ROOT / "scripts" / "diagnose.py"), "-", "--json", "--quiet"]
if case.get("context"):
    cmd += ["--context", case["context"]]
proc = subprocess.run(cmd, input=case.get("log", ""), capture_output=True, text=True, timeout=120)
result = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
causes = [c["id"] for c in result.get("causes", [])]
print(json.dumps({"cause": causes[0] if causes else None, "causes": causes, "patch": result.get("patch")}))
