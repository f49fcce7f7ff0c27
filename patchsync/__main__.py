"""``python -m patchsync``: the same as the ``patchsync`` command."""

import sys

from patchsync.cli.main import main

sys.exit(main())
