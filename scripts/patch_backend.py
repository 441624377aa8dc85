#!/usr/bin/env python3
"""Apply distdoctor's libcst patches to a repository: diff, report, atomic in-place write (see --help)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.patching.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
