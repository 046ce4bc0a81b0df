"""``python -m tests.fuzz``: see :mod:`tests.fuzz.cli`."""

import sys

from .cli import main

sys.exit(main())
