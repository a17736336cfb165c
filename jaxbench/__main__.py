"""`python -m jaxbench` is `jaxbench`."""

import sys

from jaxbench.main import main

sys.exit(main())
