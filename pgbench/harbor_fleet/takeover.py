"""The takeover part: `pgharbor --takeover --config SAME` during pgbench -l
through one pgharbor; when the old process exits, and the per-transaction
log split into the takeover's window and the rest."""

import glob
import gzip
import os
import subprocess
import time

from harbor_bench.parse import parse_pgbench
from harbor_bench.stats import median
from harbor_bench.util import say

from .figures import fmt, percentile


def parse_txlog_line(line):
    """pgbench -l's line "client tx latency_us script epoch_s epoch_us [...]" ->
    (start_s, end_s, latency_us or None, failed); latency "failed" (PostgreSQL
    15) is a failed transaction, "skipped" one never run (returned as None)."""
    f = line.split()
    if len(f) < 6:
        return None
    end = int(f[4]) + int(f[5]) / 1e6
    if f[2] == "skipped":
        return None
    if f[2] == "failed":
        return end, end, None, True
    lat = int(f[2])
    return end - lat / 1e6, end, lat, False


def split_window(txs, t0, t1):
    """The transactions in flight during [T0, T1) and the rest."""
    inside = [t for t in txs if t[0] < t1 and t[1] >= t0]
    rest = [t for t in txs if not (t[0] < t1 and t[1] >= t0)]
    return inside, rest


def latency_stats(txs):
    """(count, p99 ms, max ms) of the completed transactions of TXS."""
    lats = [t[2] / 1000 for t in txs if t[2] is not None]
    return len(txs), percentile(lats, 99), max(lats) if lats else None


def per_second(txs, t_origin):
    """{second since T_ORIGIN: transactions that ended in it}."""
    out = {}
    for t in txs:
        s = int(t[1] - t_origin)
        out[s] = out.get(s, 0) + 1
    return out


def window_tps_ratio(seconds, takeover_second):
    """Transactions of the takeover's second over the median of the other full
    seconds (the first and last are partial and left out)."""
    if takeover_second not in seconds:
        return 0.0
    full = sorted(seconds)[1:-1]
    others = [seconds[s] for s in full if s != takeover_second]
    return seconds[takeover_second] / median(others) if others else None


def count_lines(text, *needles):
    """Lines of TEXT containing any of NEEDLES."""
    return sum(1 for line in text.splitlines() if any(n in line for n in needles))


def aborted_clients(stderr):
    return count_lines(stderr, "aborted in command", "aborted while establishing connection")


def connection_errors(stderr):
    return count_lines(stderr, "connection to server", "could not connect")


def part_takeover(fl, mode, connect):
    """pgbench -c 16 -l through one pgharbor; `--takeover --config SAME` at --takeover-at s."""
    name = f"tk-{mode}-{connect}"
    port = fl.port()
    old, path = fl.start_harbor(name, port, mode, fl.a.pool_size if mode == "transaction" else 16)
    logdir, out = f"{fl.tmp}/txlog-{name}", f"{fl.out}/raw/takeover_{mode}_{connect}"
    os.makedirs(logdir)
    extra = ["-c", "16", "-l", f"--log-prefix={logdir}/tx"] + (["-C"] if connect == "connect" else [])
    with open(f"{out}.txt", "w") as stdout, open(f"{out}.err", "w") as stderr:
        bench = subprocess.Popen(["pgbench", "-n", "-j", "2", "-T", str(fl.a.takeover_time), "-h", "127.0.0.1",
                                  "-p", str(port), "-U", "bench", *extra, "bench"], env=fl.env(),
                                 stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
    fl.procs.append((bench, "pgbench"))
    time.sleep(fl.a.takeover_at)
    t0 = time.time()
    new = fl.spawn(f"{name}-new", [fl.bin, "--takeover", "--config", path, "--threads", "1",
                                    "--log-level", "warn"])
    old_exit = watch_exit(old, new, bench, t0)
    fl.procs = [(q, n) for q, n in fl.procs if q is not bench]
    takeover_rc = new.poll()  # None: the new process took over and serves
    fl.stop(new)
    fl.stop(old)
    with open(f"{out}.txt") as f, open(f"{out}.err") as g:
        takeover_row(fl, mode, connect, bench.returncode, f.read(), g.read(), logdir, t0, old_exit, takeover_rc)


def takeover_row(fl, mode, connect, rc, out, err, logdir, t0, old_exit, takeover_rc):
    """The run's takeover.csv row and takeover_seconds.csv rows, from pgbench's output and logs."""
    txs = read_txlogs(fl, logdir, f"{mode}_{connect}")
    inside, rest = split_window(txs, t0, t0 + fl.a.window)
    (wn, wp, wm), (rn, rp, rm) = latency_stats(inside), latency_stats(rest)
    origin = min((t[1] for t in txs), default=t0)
    secs = per_second(txs, origin)
    for s, n in sorted(secs.items()):
        fl.seconds.append(dict(mode=mode, connect=connect, second=s, tx=n,
                               takeover=int(s == int(t0 - origin))))
    rep = parse_pgbench(out)
    row = dict(mode=mode, connect=connect, rc=rc, tx=rep.tx, failed_tx=rep.failed_tx,
               aborted_clients=aborted_clients(err), connection_errors=connection_errors(err),
               window_tx=wn, window_p99_ms=wp, window_max_ms=wm, rest_tx=rn, rest_p99_ms=rp, rest_max_ms=rm,
               window_tps_vs_median=window_tps_ratio(secs, int(t0 - origin)), old_exit_s=old_exit,
               takeover_rc=takeover_rc)
    fl.trows.append(row)
    say(f"takeover {mode} {connect}: {rep.tx} tx, failed {rep.failed_tx}, aborted {row['aborted_clients']}, "
        f"window p99 {fmt(wp)} ms max {fmt(wm)} ms, rest p99 {fmt(rp)} ms max {fmt(rm)} ms")


def read_txlogs(fl, logdir, label):
    """Every line of pgbench's per-transaction logs, parsed; the logs are kept gzipped in raw/."""
    txs = []
    with gzip.open(f"{fl.out}/raw/txlog_{label}.gz", "wt") as keep:
        for path in sorted(glob.glob(f"{logdir}/tx*")):
            with open(path) as f:
                for line in f:
                    keep.write(line)
                    t = parse_txlog_line(line)
                    if t:
                        txs.append(t)
    return txs


def watch_exit(old, new, bench, t0, linger=150):
    """Waits for BENCH to end, noting when OLD exits: seconds from T0, or None
    when it is still running LINGER s after T0 (pool.shutdown_timeout is 120 s)
    or NEW exited (a takeover that failed leaves the old process serving)."""
    old_exit = None
    while bench.poll() is None or (old_exit is None and new.poll() is None and time.time() - t0 < linger):
        if old_exit is None and old.poll() is not None:
            old_exit = time.time() - t0
        time.sleep(0.05)
    return old_exit


def takeover_section(trows, window, seconds, at):
    """summary.md's takeover table."""
    out = [f"## Takeover under load (`pgharbor --takeover` at {at:g} s of `pgbench -n -j 2 -c 16 -T {seconds} -l`)",
           "", "TPC-B-like script, straight to one pgharbor over TCP; `connect` adds `-C`. "
           f"Window: transactions in flight during the {window:g} s from the start of the takeover "
           "command; rest: all others. `tps ratio`: transactions ending in the takeover's second over "
           "the median of the run's other full seconds.", "",
           "| mode | connect | failed tx | aborted clients | connection errors | window tx | window p99 / max ms "
           "| rest p99 / max ms | tps ratio | old process exit s | pgbench rc |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for t in trows:
        out.append(f"| {t['mode']} | {t['connect']} | {t['failed_tx']} | {t['aborted_clients']} | "
                   f"{t['connection_errors']} | {t['window_tx']} | {fmt(t['window_p99_ms'])} / "
                   f"{fmt(t['window_max_ms'])} | {fmt(t['rest_p99_ms'])} / {fmt(t['rest_max_ms'])} | "
                   f"{fmt(t['window_tps_vs_median'])} | {fmt(t['old_exit_s'], 1)} | {t['rc']} |")
    return out + [""]

