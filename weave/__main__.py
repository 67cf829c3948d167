"""`python -m weave`: the engine's command line (see weave.cli)."""

import sys

from weave.cli import main

sys.exit(main())
