"""``python -m mininet_tests.heavy_tail``: the heavy-tail experiment's command line."""

import sys

from mininet_tests.heavy_tail.cli import main

sys.exit(main())
