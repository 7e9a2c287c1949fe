"""The run from start to finish: setup, the parts asked for, the results,
and on any exit the runs made so far written and every process stopped."""

import signal
import sys

from harbor_bench import procfs, system
from harbor_bench.util import Die, say

from . import proxy, report, scaling, takeover
from .cli import options
from .runtime import Fleet


def run(fl):
    """PostgreSQL, HAProxy with every frontend, then the parts asked for, then the results."""
    fl.load_start = procfs.loadavg()[1]
    fl.prepare()
    fl.start_postgres()
    fe = {k: fl.port() for k in ("one", "two", "solo", "pair2", "pair3", "proxy", "plain", "proxy_harbor",
                                 "plain_harbor")}
    fl.start_haproxy([("one", fe["one"], [("solo", fe["solo"], False)]),
                      ("two", fe["two"], [("pair2", fe["pair2"], False), ("pair3", fe["pair3"], False)]),
                      ("proxy", fe["proxy"], [("proxy", fe["proxy_harbor"], True)]),
                      ("plain", fe["plain"], [("plain", fe["plain_harbor"], False)])])
    if "fleet" in fl.a.parts:
        for m in fl.a.modes:
            scaling.part_fleet(fl, m, fe)
    if "takeover" in fl.a.parts:
        for m in fl.a.modes:
            for c in ("persistent", "connect"):
                takeover.part_takeover(fl, m, c)
    if "proxy" in fl.a.parts:
        proxy.part_proxy(fl, fe)
    report.write(fl)


def main(argv=None):
    """pgbench/fleet.py's command: the exit status."""
    args = options(sys.argv[1:] if argv is None else argv)
    system.clean_environment()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    fleet = Fleet(args)
    try:
        run(fleet)
        return 0
    except Die as e:
        sys.stderr.write(f"ERROR: {e}\n")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not fleet.written and (fleet.rows or fleet.trows):
            say("interrupted: writing the runs made so far")
            report.write(fleet)
        fleet.cleanup()

