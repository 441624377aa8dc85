#!/usr/bin/env python3
"""Score a responder on distdoctor's eval cases (see --help); the logic lives in distdoctor.evals."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distdoctor.evals.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
