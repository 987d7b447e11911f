"""`python -m sim2real.cli` runs the `sim2real` command."""

import sys

from sim2real.cli.main import main

sys.exit(main())
