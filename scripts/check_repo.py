#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = ["pyyaml>=6", "jsonschema>=4.17", "libcst>=1.1"]
# ///
"""Check distributed PyTorch code for hazards before launch: `path:line:col: CODE message` (see --help)."""

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # never write __pycache__ into the skill folder, which may be read-only or shared
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.cli import run_script  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_script("check"))
