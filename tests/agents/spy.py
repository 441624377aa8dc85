"""Fake agent that records what it was given (stdin JSON keys, DISTDOCTOR_SKILL) into the directory argv[1]."""
import json
import os
import sys
from pathlib import Path

raw = sys.stdin.read()
case = json.loads(raw)
out = Path(sys.argv[1]) / f"{case['id']}.json"
out.write_text(json.dumps({"stdin": case, "skill": os.environ.get("DISTDOCTOR_SKILL")}))
print(json.dumps({"cause": "port_in_use"}))
