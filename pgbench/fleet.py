#!/usr/bin/env python3
"""Issue 17's benchmarks: pgharbor behind HAProxy, the takeover under load,
and the cost of the PROXY protocol per login (Python 3.9+, stdlib only).

  pgbench/fleet.py [--rounds 3] [--time 10] [--parts fleet,takeover,proxy] ...

Starts its own throwaway PostgreSQL (initdb as the `postgres` OS user),
one HAProxy (Debian's, `mode tcp`, installed with apt when missing) and the
pgharbor processes each part needs, on free ports from 23432 (below the
tests' 25000-32767 and the harness's 55432+), and stops every one of them by
pid and removes its temp dir on exit. Results: results/<date>_<time>_fleet/
(summary.md, runs.csv, takeover.csv, takeover_seconds.csv, raw/).

  fleet     pgbench -S -c 32/64 through HAProxy to 1 pgharbor, and to 2
            pgharbors (HAProxy `balance leastconn` over two ports), each
            `--threads 1`; transaction and session pooling; rounds interleaved.
  takeover  pgbench -c 16 -l through one pgharbor (TCP), `pgharbor --takeover
            --config SAME` at --takeover-at s; persistent and -C; both modes.
  proxy     pgbench -C -S -c 8 through HAProxy with send-proxy-v2 (pgharbor
            proxy_protocol_from = 127.0.0.1/32) against HAProxy without it.

The code lives in harbor_fleet/; its pure functions (ratios, percentiles, log
parsing, configs) are tested by pgbench/test_fleet.py.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harbor_fleet.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
