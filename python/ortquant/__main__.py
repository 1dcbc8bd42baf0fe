"""``python -m ortquant`` = the ``ortquant`` command."""

import sys

from ortquant.cli import main

sys.exit(main())
