#!/usr/bin/env python3
"""The summary side of pgbench/run, for results directories after the fact
(Python 3.11, standard library only). The code lives in harbor_bench/; this
file keeps the old command line and names.

  bench.py summarize RAW_CSV [IDLE_CSV]
      Print the Markdown tables of a raw.csv written by pgbench/run.
  bench.py export RAW_CSV OUT_DIR [IDLE_CSV]
      Write OUT_DIR/results.json, OUT_DIR/medians.csv and OUT_DIR/plots/.
  bench.py scram-secret PASSWORD ITERATIONS
      Print a PostgreSQL SCRAM-SHA-256 secret with a fresh random salt.
  bench.py free-port START
      Print the first TCP port >= START that can be bound on 127.0.0.1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harbor_bench.export import (cell_medians, export, idle_json, load_rows, medians_csv,  # noqa: E402,F401
                                 plot_files, ratios, results_json)
from harbor_bench.model import *  # noqa: E402,F401,F403
from harbor_bench.parse import parse_conninfo, quote_value, split_conninfo  # noqa: E402,F401
from harbor_bench.stats import *  # noqa: E402,F401,F403
from harbor_bench.summary import summary_text  # noqa: E402
from harbor_bench.util import Die, free_port, scram_secret  # noqa: E402


def summarize(path, idle_path=None):
    """Print the tables of raw.csv at PATH (and idle.csv at IDLE_PATH, if it exists)."""
    rows = load_rows(path)
    if not rows:
        raise SystemExit(f"{path}: no runs")
    idle = load_rows(idle_path) if idle_path and os.path.exists(idle_path) else None
    print(summary_text(rows, idle))


def main(argv):
    if len(argv) == 3 and argv[0] == "scram-secret":
        print(scram_secret(argv[1], int(argv[2])))
    elif len(argv) == 2 and argv[0] == "free-port":
        try:
            print(free_port(int(argv[1])))
        except Die as e:
            raise SystemExit(str(e))
    elif len(argv) in (3, 4) and argv[0] == "export":
        export(*argv[1:])
    elif len(argv) in (2, 3) and argv[0] == "summarize":
        summarize(*argv[1:])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
