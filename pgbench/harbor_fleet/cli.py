"""The command line: the parts, the pool modes and the run's sizes."""

import argparse

MODES = ("transaction", "session")
PARTS = ("fleet", "takeover", "proxy")


def csv_list(kind, choices=None):
    """An argparse type: a comma-separated list of KIND, each one of CHOICES when given."""
    def parse(text):
        xs = [kind(x) for x in text.split(",") if x]
        if choices and any(x not in choices for x in xs):
            raise argparse.ArgumentTypeError(f"choose from {','.join(choices)}")
        return xs
    return parse


def options(argv):
    """The parsed command line ARGV."""
    p = argparse.ArgumentParser(prog="pgbench/fleet.py", description="Issue 17's benchmarks: pgharbor behind "
                                "HAProxy (1 vs 2 instances), the takeover under load, PROXY protocol cost per login.")
    p.add_argument("--parts", type=csv_list(str, PARTS), default=list(PARTS))
    p.add_argument("--modes", type=csv_list(str, MODES), default=list(MODES), help="pool modes of fleet and takeover")
    p.add_argument("--clients", type=csv_list(int), default=[32, 64], help="fleet's client counts")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--time", type=int, default=10, help="seconds per measured run (fleet, proxy)")
    p.add_argument("--warmup", type=int, default=2, help="seconds of unrecorded warm-up per cell")
    p.add_argument("--pool-size", type=int, default=20, help="transaction-mode backends: 1 instance's pool; "
                                                             "each of 2 instances gets half")
    p.add_argument("--takeover-time", type=int, default=20, help="pgbench -T of the takeover runs")
    p.add_argument("--takeover-at", type=float, default=8, help="seconds into the run the takeover starts")
    p.add_argument("--window", type=float, default=1.0, help="seconds from the takeover counted as its window")
    p.add_argument("--scale", type=int, default=10)
    p.add_argument("--pgharbor-bin", help="measure this binary (default: target/release/pgharbor, built)")
    p.add_argument("--no-build", action="store_true", help="use target/release/pgharbor as it is")
    p.add_argument("--no-install", action="store_true", help="do not apt-get install a missing haproxy")
    p.add_argument("--out", help="results directory (default results/<date>_<time>_fleet)")
    return p.parse_args(argv)

