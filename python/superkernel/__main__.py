"""``python -m superkernel run|bench|explain|generate CONFIG`` (superkernel._cli)."""

import sys

from ._cli import main

sys.exit(main())
