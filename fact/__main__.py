"""`python -m fact ...`: the `fact` command where the console script is not on PATH."""

import sys

from fact.cli import main

sys.exit(main())
