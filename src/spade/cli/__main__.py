"""``python -m spade.cli``: the ``spade`` command."""

import sys

from spade.cli import main

sys.exit(main())
