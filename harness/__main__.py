"""`python -m harness` is `jaxbench`."""

import sys

from harness.cli import main

sys.exit(main())
