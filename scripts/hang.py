#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = ["pyyaml>=6", "jsonschema>=4.17", "libcst>=1.1", "py-spy>=0.3.14"]
# ///
"""Name the rank, the line and the cause of a distributed job that hangs silently. See --help."""

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # never write __pycache__ into the skill folder, which may be read-only or shared
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.cli import run_script  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_script("hang"))
