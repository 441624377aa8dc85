"""`python -m distdoctor.check PATH...`: the checker's command line (same as scripts/check_repo.py)."""

import sys

from distdoctor.check.cli import main

sys.exit(main())
