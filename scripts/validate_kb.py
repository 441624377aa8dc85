#!/usr/bin/env python3
"""Validate the knowledge base (references/, profiles/, SKILL.md); print `file:line: what`, exit 0/1."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.validate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
