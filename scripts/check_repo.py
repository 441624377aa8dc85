#!/usr/bin/env python3
"""Check distributed PyTorch code for hazards before launch: `path:line:col: CODE message` (see --help)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.check.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
