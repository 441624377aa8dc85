"""Stand-in agent that never uses the skill, even when it is installed: reads the end of the logs and
guesses from keywords; changes nothing in a repo."""
import json
import sys
from pathlib import Path

from _solver import naive, task_from_payload

print(json.dumps(naive(task_from_payload(json.loads(sys.stdin.read()), Path.cwd()))))
