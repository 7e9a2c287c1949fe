"""The workloads' commands, and one measured run of one target in one cell.

A run records what the fairness rules ask for: throughput from pgbench's
report (or the bulk COPY's bytes over psql's wall time), the pooler's own
CPU from /proc/PID/stat, PostgreSQL's and pgbench's CPU, the 1-minute load
before it and how much CPU other processes used during it.
"""

import datetime
import os
import subprocess
import time

from . import procfs
from .cli import PERSISTENT_RE
from .model import BULK, Run, cert_of
from .parse import count_copies, first_match, parse_pgbench
from .util import warn

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pgbench/


def pgbench_args(s, w):
    """pgbench's arguments for workload W, the run's length included ([] for bulk)."""
    m = PERSISTENT_RE.fullmatch(w)
    if m:
        c = int(m.group(2) or 16)
        # -S for select-only; the TPC-B-like default script otherwise
        return ["-n"] + (["-S"] if m.group(1) == "persistent" else []) + \
            ["-c", str(c), "-j", str(2 if c >= 2 else 1), "-T", str(s.time)]
    return {"connect": ["-n", "-S", "-C", "-c", "1", "-T", str(s.time)],
            "connect8": ["-n", "-S", "-C", "-c", "8", "-j", "2", "-T", str(s.time)],
            "establish": ["-n", "-C", "-c", "1", "-f", f"{HERE}/empty.sql", "-T", str(s.time)],
            "bulkselect": ["-n", "-c", "1", "-t", str(s.bulk_selects), "-f", f"{HERE}/bulk_select.sql"],
            "bulk": []}[w]


def command_text(h, w):
    """The command as raw.csv and the summary show it."""
    if w == "bulk":
        return f"psql: {h.s.bulk_copies} x \\copy ({h.BULK_QUERY}) to '/dev/null'"
    return ("pgbench " + " ".join(pgbench_args(h.s, w))).replace(HERE + "/", "pgbench/")


def estimate_tenths(h, w):
    """A run's expected length, in tenths of a second: a bulk copy at ~200
    MB/s; pgbench's -T; 0.5 s of overhead per run."""
    if w == "bulk":
        return h.s.bulk_copies * h.bulk_bytes // 20000000 + 5
    if w == "bulkselect":
        return h.s.bulk_selects * h.bulk_bytes // 20000000 + 5
    return h.s.time * 10 + 5


def now_iso():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def failed_run(h, rnd, w, t, g, why):
    """A cell of a target that could not start: recorded as not ok, nothing run."""
    r = Run(round=rnd, workload=w, transport=t, target=g, command=command_text(h, w), started=now_iso(),
            ncpu=h.ncpu, status=why, cert=cert_of(t), pool_mode=h.targets[g].mode(h.s.pool_mode))
    h.progress_line(f"  r{rnd} {w:<10} {t:<13} {g:<14} {why}")
    return r


class Meter:
    """CPU ticks before and after a run: the pooler under test, all poolers,
    PostgreSQL's tree, this process's reaped children, the whole machine."""

    def __init__(self, h, pid):
        self.h, self.pid = h, pid

    def read(self):
        pools = sum(procfs.ticks(p) for p in self.h.pooler_pids())
        return dict(mine=procfs.ticks(self.pid), pool=pools, pg=procfs.tree_ticks(self.h.pg_pid),
                    self=procfs.self_children_ticks(), busy=procfs.machine_busy(), t=time.monotonic())


def cpu_figures(h, r, before, after, has_pid):
    """Fills R's CPU columns from two Meter readings."""
    hz = procfs.clock_ticks()
    d = {k: after[k] - before[k] for k in after}
    r.wall_s = d["t"]
    r.other_cpus = (d["busy"] - d["pg"] - d["pool"] - d["self"]) / hz / d["t"]
    cpu = d["mine"] / hz
    r.pooler_cpu_s = cpu if has_pid else None
    if has_pid and r.workload not in BULK and r.tx:
        r.pooler_us_per_tx = cpu * 1e6 / r.tx
    if has_pid and r.workload in BULK and r.bytes:
        r.pooler_s_per_gb = cpu / (r.bytes / 1e9)
    r.pg_cpu_s = d["pg"] / hz if h.pg_pid else None
    r.pgbench_cpu_s = d["self"] / hz


def bulk_figures(h, r, log, rc, seconds):
    copies = count_copies(log, h.bulk_rows)
    r.tx, r.failed_tx, r.bytes = copies, h.s.bulk_copies - copies, copies * h.bulk_bytes
    r.mb_per_s = r.bytes / 1e6 / seconds
    if rc != 0 or copies != h.s.bulk_copies:
        return (f"psql rc={rc}, {copies} of {h.s.bulk_copies} COPYs complete: "
                f"{first_match(log, 'error|fatal|could not')}")
    return "ok"


def pgbench_figures(h, r, log, rc):
    p = parse_pgbench(log)
    r.tps, r.tx, r.failed_tx, r.latency_ms, r.conn_ms = p.tps, p.tx, p.failed_tx, p.latency_ms, p.conn_ms
    if r.workload == "bulkselect" and p.tps is not None and p.tx is not None:
        r.bytes = p.tx * h.bulk_bytes
        r.mb_per_s = p.tps * h.bulk_bytes / 1e6
    if rc != 0 or p.tps is None or p.failed_tx:
        return f"pgbench rc={rc}: {first_match(log, 'error|fatal|abort')}"
    return "ok"


def flags(h, r):
    """Why a run may not be trusted: the machine was busy before, or other
    processes used CPU during it (not when PostgreSQL's process is unknown,
    since "others" then include it)."""
    out = []
    if r.load1_before > float(h.s.load_limit):
        out.append(f"load1>{h.s.load_limit}")
    if h.pg_pid and round(r.other_cpus, 2) > float(h.s.other_limit):
        out.append(f"others>{h.s.other_limit}cpu")
    return "; ".join(out)


def execute(h, w, target, transport, log_path):
    """Runs the workload's command; (rc, its output, seconds it took)."""
    if w == "bulk":
        cmd = ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-f", h.bulk_sql, target.conninfo(transport)]
    else:
        cmd = ["pgbench", *pgbench_args(h.s, w), target.conninfo(transport)]
    with open(log_path, "w") as log:
        c0 = time.monotonic()
        rc = subprocess.run(target.argv(transport, cmd), env=target.env(transport), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT).returncode
        c1 = time.monotonic()
    with open(log_path, errors="replace") as f:
        return rc, f.read(), c1 - c0


def run_one(h, rnd, w, transport, g):
    """One measured run of target G; its Run row."""
    target = h.targets[g]
    if target.failed:
        return failed_run(h, rnd, w, transport, g, f"not run: {target.failed}")
    h.ensure_pooler(g, f"round {rnd} {w}/{transport}")
    pid = target.pid if target.spec.kind != "postgres" else None
    r = Run(round=rnd, workload=w, transport=transport, target=g, command=command_text(h, w), ncpu=h.ncpu,
            cert=cert_of(transport), pool_mode=target.mode(h.s.pool_mode))
    _, r.load1_before = procfs.loadavg()
    r.started = now_iso()
    meter = Meter(h, pid)
    before = meter.read()
    r.rc, log, seconds = execute(h, w, target, transport, f"{h.out}/runs/r{rnd}-{w}-{transport}-{g}.log")
    time.sleep(0.3)  # let the server and pooler finish the disconnects
    after = meter.read()
    status = bulk_figures(h, r, log, r.rc, seconds) if w == "bulk" else pgbench_figures(h, r, log, r.rc)
    r.status = "pooler exited during the run" if pid and not procfs.alive(pid) else status
    cpu_figures(h, r, before, after, bool(pid))
    r.flags = flags(h, r)
    show_run(h, r)
    return r


def show_run(h, r):
    def f(x, fmt):
        return "-" if x is None else fmt.format(x)
    if r.workload in BULK:
        shown = f"MB/s {f(r.mb_per_s, '{:.1f}'):>9}  pooler {f(r.pooler_s_per_gb, '{:.2f}'):>7} s/GB"
    else:
        shown = f"tps {f(r.tps, '{:.6f}'):>10}  pooler {f(r.pooler_us_per_tx, '{:.1f}'):>7} µs/tx"
    h.progress_line(f"  r{r.round} {r.workload:<10} {r.transport:<13} {r.target:<14} {shown}  load1 "
                    f"{r.load1_before:5.2f}  others {r.other_cpus:5.2f} CPU  {r.status}"
                    + (f"  [{r.flags}]" if r.flags else ""))


def warmup(h):
    """An unrecorded pgbench -S -c 4 per target, over its first transport."""
    from .util import say
    say(f"warm-up ({h.s.warmup}s per target, not recorded)")
    for t in h.live_targets():
        tr = t.serves[0]
        p = subprocess.run(t.argv(tr, ["pgbench", "-n", "-S", "-c", "4", "-T", str(h.s.warmup), t.conninfo(tr)]),
                           env=t.env(tr), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        if p.returncode != 0:
            warn(f"warm-up against {t.name} failed")
