"""`python -m distdoctor COMMAND ...`: the same as the `distdoctor` command."""

import sys

from distdoctor.cli import main

if __name__ == "__main__":
    sys.exit(main())
