"""``python -m privci ...`` is the ``privci`` command line."""

import sys

from .cli import main

sys.exit(main())
