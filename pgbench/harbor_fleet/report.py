"""The results directory's files: runs.csv, takeover.csv,
takeover_seconds.csv and summary.md with its header and the parts' tables."""

import csv
import datetime
import os

from harbor_bench import system
from harbor_bench.util import say

from .proxy import proxy_section
from .runtime import SCRAM_ITERATIONS
from .scaling import fleet_section
from .takeover import takeover_section

RUN_FIELDS = ("part", "mode", "cell", "clients", "round", "rc", "tps", "tx", "failed_tx", "latency_ms",
              "pooler_cpu_s", "pooler_us_per_tx", "haproxy_us_per_tx", "load1_before", "busy_cpus")
TAKEOVER_FIELDS = ("mode", "connect", "rc", "tx", "failed_tx", "aborted_clients", "connection_errors",
                   "window_tx", "window_p99_ms", "window_max_ms", "rest_tx", "rest_p99_ms", "rest_max_ms",
                   "window_tps_vs_median", "old_exit_s", "takeover_rc")


def write(fl):
    """Writes the CSVs and summary.md of the runs made so far."""
    write_csv(f"{fl.out}/runs.csv", RUN_FIELDS, fl.rows)
    write_csv(f"{fl.out}/takeover.csv", TAKEOVER_FIELDS, fl.trows)
    write_csv(f"{fl.out}/takeover_seconds.csv", ("mode", "connect", "second", "tx", "takeover"), fl.seconds)
    with open(f"{fl.out}/summary.md", "w") as f:
        f.write("\n".join(summary(fl)) + "\n")
    fl.written = True
    say(f"results in {fl.out}")


def summary(fl):
    """summary.md's lines: the run's conditions, then the tables of the parts run."""
    a = fl.a
    lines = [f"# pgharbor fleet benchmarks (issue 17), {datetime.datetime.now():%F %T}", "",
             f"{a.rounds} rounds x {a.time} s per cell (warm-up {a.warmup} s), pgbench scale {a.scale}, "
             f"`-j 2`, SCRAM login ({SCRAM_ITERATIONS} iterations), every pgharbor `--threads 1`, "
             f"HAProxy {system.haproxy_version(fl.haproxy)} `mode tcp`, `balance leastconn`, no health checks. "
             f"{os.cpu_count()} CPUs, load1 at the start {fl.load_start}. Ratios compare runs of "
             "this run; absolute figures drift between runs.", ""]
    if "fleet" in a.parts:
        lines += fleet_section(fl.rows, a.modes, a.clients)
    if "takeover" in a.parts:
        lines += takeover_section(fl.trows, a.window, a.takeover_time, a.takeover_at)
    if "proxy" in a.parts:
        lines += proxy_section(fl.rows, fl.hz)
    busy = [r for r in fl.rows if r["load1_before"] > 1.5]
    if busy:
        lines.append(f"{len(busy)} of {len(fl.rows)} runs started with load1 > 1.5 (other work on the machine).")
    return lines


def write_csv(path, fields, rows):
    """ROWS as CSV with FIELDS for columns, None as empty."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r[k]) for k in fields})

