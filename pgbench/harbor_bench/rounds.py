"""The order of the runs, which is a fairness rule, and the idle-client
memory measurement after them.

Targets are interleaved innermost, so drift on the shared machine hits all
alike: within a cell every target runs once, in the table's order in odd
rounds and in reverse in even ones, so that no target always runs right
after another (what one run leaves the server, a warm cache or dead
tuples, falls on each neighbour alike). Within a workload the plain
transports run first, then the TLS cells once per certificate, starting
with the one being served (one switch per workload, the order alternating).
"""

import subprocess
import time

from . import procfs
from .model import cert_of
from .targets import restart, use_cert
from .util import say, warn
from .workloads import estimate_tenths, run_one


def cell_order(targets, rnd):
    """The targets of a cell in round RND's order: as given in odd rounds, reversed in even ones."""
    return list(targets) if rnd % 2 else list(reversed(targets))


def cert_order(certs, current):
    """The TLS cells' certificates, the one being served first (no switch before it)."""
    return [current] + [c for c in certs if c != current]


def plan(s, targets, current_cert):
    """Every cell of the run in order, as (round, workload, transport, targets
    in their order): plain transports, then TLS per certificate. The
    certificate order depends on the one served when the workload starts,
    which is the last one of the previous workload."""
    cells, cur = [], current_cert
    for rnd in range(1, s.rounds + 1):
        for w in s.workloads:
            transports = list(s.plain_transports)
            if s.with_tls:
                order = cert_order(s.certs, cur)
                transports += [f"tcp-tls-{c}" for c in order]
                cur = order[-1]
            # The login cells after them (their certificate: ECDSA).
            transports += s.auth_cells
            if s.auth_cells:
                cur = cert_of(s.auth_cells[-1])
            for t in transports:
                runs = [g.name for g in cell_order(targets, rnd) if g.runs(t, w)]
                cells.append((rnd, w, t, runs))
    return cells


def fmt_duration(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds < 3600 else \
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def progress(i, n, elapsed, done_weight, total_weight):
    """"cell i/n, elapsed m:ss, about m:ss left": the time left is the elapsed
    time scaled by the expected length of what is left (bulk and pgbench runs
    differ in length, so cells are weighed by their estimate)."""
    left = elapsed * (total_weight - done_weight) / done_weight if done_weight else 0
    return f"cell {i}/{n}, {fmt_duration(elapsed)} elapsed, about {fmt_duration(left)} left"


def run_rounds(h, raw):
    """Every cell of every round; each run's row appended to RAW as it ends."""
    cells = plan(h.s, h.targets.values(), h.cur_cert)
    weight = [sum(estimate_tenths(h, w) for _ in runs) for _, w, _, runs in cells]
    total, done, t0, last_round = sum(weight), 0, time.monotonic(), 0
    for i, (rnd, w, t, runs) in enumerate(cells):
        if rnd != last_round:
            say(f"round {rnd}/{h.s.rounds}")
            last_round = rnd
        if cert_of(t):
            use_cert(h, cert_of(t))
        for g in runs:
            r = run_one(h, rnd, w, t, g)
            with open(raw, "a") as f:
                f.write(r.csv_fields() + "\n")
        done += weight[i]
        say(progress(i + 1, len(cells), time.monotonic() - t0, done, total))


def idle_phases(t):
    """idle.py's phases for T: TCP plain and TLS, or its socket if it has no TCP."""
    phases = [f"{k}={t.host}:{t.port}" for k, tr in (("tcp", "tcp"), ("tls", "tcp-tls")) if t.runs(tr)]
    if not phases and t.runs("unix"):
        phases = [f"unix={t.sock}/.s.PGSQL.{t.port}"]
    return phases


def run_idle(h, idle_csv):
    """For each pooler and each of TCP plain and TCP + TLS: N clients log in and
    stay idle (pgbench/idle.py), VmRSS before and after. pgharbor and PgBouncer
    are restarted before each batch, so a batch neither reuses memory an
    earlier one freed nor needs room for it; a --pooler is measured as it
    runs, one batch after the other."""
    from .workloads import HERE
    for name in ("pgharbor", "pgharbor-base", "pgbouncer", "pooler"):
        t = h.targets.get(name)
        if not t or t.failed:
            continue
        if not t.pid or not procfs.alive(t.pid):
            warn(f"memory per idle client: {name} is not running or its process is unknown: not measured")
            continue
        for ph in idle_phases(t):
            if name == "pooler":
                h.idle_fresh = False
            elif not restart(h, name, "restart before idle clients"):
                warn(f"memory per idle client: {name} did not restart; its memory is not measured")
                break
            say(f"memory per idle client: {name}, {ph.split('=')[0]}, {h.s.idle_clients} clients (process "
                f"{t.pid}, open files limit {procfs.limits_open_files(t.pid)})")
            p = subprocess.run(["python3", f"{HERE}/idle.py", "--pid", str(t.pid), "--clients",
                                str(h.s.idle_clients), "--user", t.user, "--dbname", t.db, "--csv", idle_csv,
                                "--target", name, "--pool-mode", t.mode(h.s.pool_mode), "--phase", ph],
                               env=t.env(IDLE_PASSWORD=t.pw), stdin=subprocess.DEVNULL, stdout=2)
            if p.returncode != 0:
                warn(f"idle clients against {name} failed")
            time.sleep(1)  # let the pooler finish closing them
