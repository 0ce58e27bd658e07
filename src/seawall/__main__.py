"""`python -m seawall`: the same as the `seawall` command."""

import sys

from seawall.cli import main

if __name__ == "__main__":
    sys.exit(main())
