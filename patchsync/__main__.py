"""``python -m patchsync``: the same as the ``patchsync`` command."""

import sys

from .cli import main

sys.exit(main())
