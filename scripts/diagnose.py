#!/usr/bin/env python3
"""Diagnose distributed PyTorch logs: first failure, ranked causes, fix. See --help."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.diagnose.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
