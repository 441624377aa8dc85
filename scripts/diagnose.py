#!/usr/bin/env python3
# /// script
# requires-python = ">=3.10"
# dependencies = ["pyyaml>=6", "jsonschema>=4.17", "bm25s>=0.2", "google-re2>=1.1", "hyperscan>=0.7; platform_machine == 'x86_64'", "libcst>=1.1"]
# ///
"""Diagnose distributed PyTorch logs: first failure, ranked causes, fix. See --help."""

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # never write __pycache__ into the skill folder, which may be read-only or shared
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.cli import run_script  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_script("diagnose"))
