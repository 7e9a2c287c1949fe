"""python3 -m harbor_bench: what pgbench/run execs."""

import sys

from .main import main

sys.exit(main(sys.argv[1:]))
