"""``python -m gapbench.schemas export DIR``."""

import sys

from . import main

sys.exit(main())
