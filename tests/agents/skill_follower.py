"""Stand-in agent that uses the skill when it is there: DISTDOCTOR_SKILL names SKILL.md inside the
workspace, and the agent runs that skill's scripts (diagnose, patch_backend, hang). Without it, it guesses."""
import json
import os
import sys
from pathlib import Path

from _solver import naive, task_from_payload, with_skill

task = task_from_payload(json.loads(sys.stdin.read()), Path.cwd())
skill = os.environ.get("DISTDOCTOR_SKILL")
print(json.dumps(with_skill(task, Path(skill)) if skill and Path(skill).is_file() else naive(task)))
