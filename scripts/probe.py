#!/usr/bin/env python3
"""Launch probe: start it with the job's own launcher (torchrun/srun) and the job's Python; see --help."""
# Runs inside the job, with the job's own interpreter and torch: no inline metadata on purpose.

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # never write __pycache__ into the skill folder, which may be read-only or shared
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.cli import run_script  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_script("probe"))
