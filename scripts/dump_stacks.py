#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = []
# ///
"""Dump the Python stacks of every rank process of distributed jobs on this host (see --help)."""

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # never write __pycache__ into the skill folder, which may be read-only or shared
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.cli import run_script  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_script("stacks"))
