#!/usr/bin/env python3
"""Name the rank, the line and the cause of a distributed job that hangs silently. See --help."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.hang.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
