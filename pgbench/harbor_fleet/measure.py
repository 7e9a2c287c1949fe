"""One measured pgbench run with the CPU of the poolers and HAProxy around
it (a row of runs.csv), the warm-ups, and the rounds that interleave cells."""

import subprocess
import time

from harbor_bench import procfs
from harbor_bench.parse import parse_pgbench
from harbor_bench.util import say

from .figures import cell_order, fmt, us_per


def pgbench(fl, port, extra, seconds, log_name, cwd=None):
    """pgbench -T SECONDS against 127.0.0.1:PORT; its command and output are kept in raw/LOG_NAME.txt."""
    cmd = ["pgbench", "-n", "-j", "2", "-T", str(seconds), "-h", "127.0.0.1", "-p", str(port), "-U", "bench",
           *extra, "bench"]
    r = subprocess.run(cmd, env=fl.env(), capture_output=True, text=True, cwd=cwd)
    with open(f"{fl.out}/raw/{log_name}.txt", "w") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    return r


def measured(fl, part, mode, cell, clients, rnd, port, extra, pids):
    """One pgbench run with the CPU of PIDS (the poolers) and HAProxy around it: a row."""
    load1 = procfs.loadavg()[1]
    before = [procfs.ticks(p) for p in pids], procfs.ticks(fl.ha.pid), procfs.machine_busy(), time.time()
    r = pgbench(fl, port, ["-c", str(clients), *extra], fl.a.time, f"{part}_{mode}_{cell}_r{rnd}")
    after = [procfs.ticks(p) for p in pids], procfs.ticks(fl.ha.pid), procfs.machine_busy(), time.time()
    rep = parse_pgbench(r.stdout)
    pool_t, ha_t = sum(after[0]) - sum(before[0]), after[1] - before[1]
    busy = after[2] - before[2]
    row = dict(part=part, mode=mode, cell=cell, clients=clients, round=str(rnd), rc=r.returncode,
               tps=rep.tps, tx=rep.tx, failed_tx=rep.failed_tx, latency_ms=rep.latency_ms,
               pooler_cpu_s=pool_t / fl.hz, pooler_us_per_tx=us_per(pool_t, fl.hz, rep.tx),
               haproxy_us_per_tx=us_per(ha_t, fl.hz, rep.tx), load1_before=load1,
               busy_cpus=round(busy / fl.hz / (after[3] - before[3]), 2))
    fl.rows.append(row)
    say(f"{part} {mode} {cell} round {rnd}: {fmt(rep.tps, 0)} tps, pooler "
        f"{fmt(row['pooler_us_per_tx'], 1)} µs/tx, haproxy {fmt(row['haproxy_us_per_tx'], 1)} µs/tx")


def warm(fl, port, clients, extra=()):
    """An unrecorded --warmup run of CLIENTS clients."""
    pgbench(fl, port, ["-c", str(clients), *extra], fl.a.warmup, f"warmup_{port}_{clients}")


def rounds(fl, part, mode, cells):
    """CELLS [(cell, clients, port, extra, pids)], interleaved over the rounds."""
    for rnd in range(1, fl.a.rounds + 1):
        for cell, clients, port, extra, pids in cell_order(cells, rnd):
            measured(fl, part, mode, cell, clients, rnd, port, extra, pids)
