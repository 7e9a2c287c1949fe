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

The pure functions (ratios, percentiles, log parsing, configs) are tested by
pgbench/test_fleet.py.
"""

import argparse
import csv
import datetime
import gzip
import glob
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harbor_bench import procfs, system  # noqa: E402
from harbor_bench.parse import parse_pgbench  # noqa: E402
from harbor_bench.stats import median  # noqa: E402
from harbor_bench.util import Die, die, free_port, say, scram_secret  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRAM_ITERATIONS = 16
PORT_BASE = 23432
MODES = ("transaction", "session")
PARTS = ("fleet", "takeover", "proxy")
RUN_FIELDS = ("part", "mode", "cell", "clients", "round", "rc", "tps", "tx", "failed_tx", "latency_ms",
              "pooler_cpu_s", "pooler_us_per_tx", "haproxy_us_per_tx", "load1_before", "busy_cpus")
TAKEOVER_FIELDS = ("mode", "connect", "rc", "tx", "failed_tx", "aborted_clients", "connection_errors",
                   "window_tx", "window_p99_ms", "window_max_ms", "rest_tx", "rest_p99_ms", "rest_max_ms",
                   "window_tps_vs_median", "old_exit_s", "takeover_rc")


# ------------------------------------------------------------------ pure --

def us_per(ticks, hz, count):
    """Microseconds of CPU per unit: TICKS clock ticks at HZ over COUNT units; None without units."""
    return ticks / hz * 1e6 / count if count else None


def cell_order(cells, rnd):
    """The cells of round RND: as given in odd rounds, reversed in even ones."""
    return list(cells) if rnd % 2 else list(reversed(cells))


def by_round(rows, cell, field):
    """{round: float(row[field])} of the rows of CELL that have the figure."""
    return {r["round"]: float(r[field]) for r in rows if r["cell"] == cell and r.get(field) not in (None, "")}


def paired(rows, a, b, field, op="ratio"):
    """Per round, A's FIELD over (op="ratio") or minus (op="diff") B's, for the rounds both have."""
    xa, xb = by_round(rows, a, field), by_round(rows, b, field)
    rounds = sorted(set(xa) & set(xb), key=int)
    if op == "ratio":
        return [xa[r] / xb[r] for r in rounds if xb[r]]
    return [xa[r] - xb[r] for r in rounds]


def cell_median(rows, cell, field):
    xs = list(by_round(rows, cell, field).values())
    return median(xs) if xs else None


def fmt(x, digits=2, suffix=""):
    return "-" if x is None else f"{x:.{digits}f}{suffix}"


def fmt_range(xs, digits=2, suffix=""):
    """'1.02x (0.98 to 1.05)': the median and range of paired figures."""
    if not xs:
        return "-"
    return f"{fmt(median(xs), digits, suffix)} ({min(xs):.{digits}f} to {max(xs):.{digits}f})"


def percentile(xs, q):
    """The nearest-rank Q-th percentile (0-100) of XS, None when empty."""
    if not xs:
        return None
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


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


def toml_list(xs):
    return "[" + ", ".join(f'"{x}"' for x in xs) + "]"


def harbor_config(port, sock, instance_id, peers, mode, pool_size, auth_file, backend, proxy_from=()):
    """One pgharbor's TOML: TCP on 127.0.0.1:PORT, its own socket dir, in a
    fleet when INSTANCE_ID (with PEERS {id: socket dir} for cancels)."""
    listen = ['addresses = ["127.0.0.1"]', f"port = {port}", f'unix_socket_dir = "{sock}"']
    if instance_id:
        listen.append(f"instance_id = {instance_id}")
    if proxy_from:
        listen.append(f"proxy_protocol_from = {toml_list(proxy_from)}")
    text = ("[listen]\n" + "\n".join(listen) + "\n\n"
            f'[auth]\nmethod = "scram-sha-256"\nauth_file = "{auth_file}"\n\n'
            f'[pool]\nmode = "{mode}"\ndefault_pool_size = {pool_size}\nmax_client_conn = 1000\n'
            'shutdown_timeout = "120s"\n\n'
            f'[databases.bench]\nconninfo = "{backend}"\n')
    if instance_id and peers:
        text += "\n[peers]\n" + "".join(f'{i} = "host={d} port={p}"\n' for i, (d, p) in sorted(peers.items()))
    return text


def haproxy_config(frontends):
    """HAProxy's config: FRONTENDS [(name, port, [(server, port, send_proxy)])],
    mode tcp, leastconn; no health checks (their connections would be charged
    to the poolers' CPU) and no logging."""
    out = ["global", "    maxconn 4096", "", "defaults", "    mode tcp", "    timeout connect 5s",
           "    timeout client 30m", "    timeout server 30m", ""]
    for name, port, servers in frontends:
        out += [f"frontend fe_{name}", f"    bind 127.0.0.1:{port}", f"    default_backend be_{name}", "",
                f"backend be_{name}", "    balance leastconn"]
        out += [f"    server {s} 127.0.0.1:{p}" + (" send-proxy-v2" if pp else "") for s, p, pp in servers]
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------- summary --

def fleet_lines(rows, mode, clients):
    """The 1-vs-2 instance table rows of one pool mode, per client count."""
    out = []
    for c in clients:
        one, two = f"1x-c{c}", f"2x-c{c}"
        for cell, label in ((one, "1 instance"), (two, "2 instances")):
            out.append(f"| {mode} | {c} | {label} | {fmt(cell_median(rows, cell, 'tps'), 0)} | "
                       f"{fmt(cell_median(rows, cell, 'latency_ms'), 3)} | "
                       f"{fmt(cell_median(rows, cell, 'pooler_us_per_tx'), 1)} | "
                       f"{fmt(cell_median(rows, cell, 'haproxy_us_per_tx'), 1)} |")
        out.append(f"| {mode} | {c} | **2 / 1, paired** | {fmt_range(paired(rows, two, one, 'tps'), suffix='x')} | | "
                   f"{fmt_range(paired(rows, two, one, 'pooler_us_per_tx'), suffix='x')} | "
                   f"{fmt_range(paired(rows, two, one, 'haproxy_us_per_tx'), suffix='x')} |")
    return out


def fleet_section(rows, modes, clients):
    head = ["## 1 and 2 pgharbor instances behind HAProxy (`pgbench -n -S`)", "",
            "Medians of the rounds; the paired rows are the median (range) of the per-round ratios "
            "2 instances / 1 instance, runs made back to back. Pooler CPU is the sum over the "
            "instances of the cell.", "",
            "| mode | clients | target | tps | latency ms | pooler µs/tx | HAProxy µs/tx |",
            "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    body = []
    for m in modes:
        body += fleet_lines([r for r in rows if r["part"] == "fleet" and r["mode"] == m], m, clients)
    return head + body + [""]


def proxy_section(rows, hz=100):
    rows = [r for r in rows if r["part"] == "proxy"]
    cells = ("send-proxy-v2", "plain")
    diff = paired(rows, *cells, "pooler_us_per_tx", op="diff")
    hdiff = paired(rows, *cells, "haproxy_us_per_tx", op="diff")
    pp, plain = (cell_median(rows, c, "pooler_us_per_tx") for c in cells)
    logins = cell_median(rows, "plain", "tx")
    out = ["## PROXY protocol v2 per login (`pgbench -n -C -S -c 8`, transaction pooling)", "",
           "| HAProxy server line | logins/s | pooler µs/login | HAProxy µs/login |", "| --- | ---: | ---: | ---: |"]
    for c in cells:
        out.append(f"| {c} | {fmt(cell_median(rows, c, 'tps'), 0)} | "
                   f"{fmt(cell_median(rows, c, 'pooler_us_per_tx'), 1)} | "
                   f"{fmt(cell_median(rows, c, 'haproxy_us_per_tx'), 1)} |")
    med = pp - plain if None not in (pp, plain) else None
    out += ["", f"Pooler CPU per login, send-proxy-v2 minus plain: {fmt(med, 1)} µs (medians); paired per round "
            f"{fmt_range(diff, 1, ' µs')}. HAProxy, the same difference: paired {fmt_range(hdiff, 1, ' µs')}. "
            f"One clock tick is {fmt(us_per(1, hz, logins), 2)} µs per login at a run's median login count.", ""]
    return out


def takeover_section(trows, window, seconds, at):
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


# --------------------------------------------------------------- runtime --

class Fleet:
    """The run: temp dir, PostgreSQL, HAProxy, pgharbors; cleanup stops them all by pid."""

    def __init__(self, args):
        self.a = args
        self.procs = []  # (Popen, name)
        self.pg_pid = None
        self.hz = procfs.clock_ticks()
        self.tmp = tempfile.mkdtemp(prefix="pgharbor-fleet.", dir=os.environ.get("TMPDIR", "/tmp"))
        os.chmod(self.tmp, 0o755)
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M%S")
        self.out = os.path.abspath(args.out or f"{ROOT}/results/{stamp}_fleet")
        os.makedirs(f"{self.out}/raw", exist_ok=True)
        self.rows, self.trows, self.seconds = [], [], []
        self.written = False
        self.next_port = PORT_BASE

    def port(self):
        p = free_port(self.next_port)
        self.next_port = p + 1
        return p

    # ---------------------------------------------------------- processes --
    def spawn(self, name, cmd, **kw):
        log = open(f"{self.tmp}/{name}.log", "a")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, **kw)
        log.close()
        self.procs.append((p, name))
        return p

    def stop(self, p):
        system.stop_pid(p.pid, signal.SIGTERM, p)
        self.procs = [(q, n) for q, n in self.procs if q is not p]

    def cleanup(self):
        for p, _ in list(self.procs):
            self.stop(p)
        if self.pg_pid and procfs.alive(self.pg_pid):
            r = system.run([f"{self.pg_bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "-s", "stop"], db=True)
            if r.returncode != 0:
                system.stop_pid(self.pg_pid, signal.SIGQUIT)
        if os.path.isdir(f"{self.out}/raw"):
            for pattern in ("*.log", "pg/*.log", "*.toml", "*.cfg"):
                for f in glob.glob(f"{self.tmp}/{pattern}"):
                    shutil.copy(f, f"{self.out}/raw/")
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --------------------------------------------------------------- setup --
    def prepare(self):
        inst = system.Installer(not self.a.no_install)
        self.haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not os.access(self.haproxy, os.X_OK) and not (inst.install("haproxy") and os.access(self.haproxy, os.X_OK)):
            die("haproxy is missing (apt-get install haproxy)")
        self.pg_bin = system.find_pg_bindir()
        if not self.pg_bin or not shutil.which("pgbench"):
            die("PostgreSQL server binaries and pgbench are needed (apt-get install postgresql postgresql-client)")
        if system.IS_ROOT and not system.db_user_exists():
            die("running as root needs a 'postgres' OS user to run PostgreSQL as")
        src = self.a.pgharbor_bin or f"{ROOT}/target/release/pgharbor"
        if not self.a.pgharbor_bin and not self.a.no_build:
            say("nice -n 19 cargo build --release")
            if subprocess.run(["nice", "-n", "19", "cargo", "build", "--release"], cwd=ROOT, stdout=2).returncode:
                die("cargo build --release failed")
        if not os.access(src, os.X_OK):
            die(f"no pgharbor binary at {src}")
        # A copy: someone rebuilding target/release mid-run changes nothing here.
        self.bin = f"{self.tmp}/pgharbor"
        shutil.copy(src, self.bin)

    def start_postgres(self):
        pgdir = f"{self.tmp}/pg"
        self.data, self.pg_sock = f"{pgdir}/data", f"{pgdir}/sock"
        os.makedirs(self.pg_sock)
        os.chmod(pgdir, 0o755)
        system.give_to_db(pgdir)
        self.pg_port = self.port()
        r = system.run([f"{self.pg_bin}/initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                        "--no-locale", "--no-sync"], db=True)
        if r.returncode:
            die(f"initdb failed: {r.stdout}{r.stderr}")
        with open(f"{self.data}/postgresql.conf", "a") as f:
            f.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.pg_port}\nunix_socket_directories = "
                    f"'{self.pg_sock}'\nmax_connections = 300\nfsync = off\n")
        with open(f"{self.data}/pg_hba.conf", "w") as f:
            f.write("local all postgres trust\nlocal all all scram-sha-256\nhost all all 127.0.0.1/32 scram-sha-256\n")
        say(f"PostgreSQL on {self.pg_sock}, port {self.pg_port}")
        r = system.run([f"{self.pg_bin}/pg_ctl", "-D", self.data, "-l", f"{self.tmp}/pg/postgres.log", "-w", "-s",
                        "start"], db=True)
        if r.returncode:
            die("PostgreSQL did not start (see postgres.log)")
        with open(f"{self.data}/postmaster.pid") as f:
            self.pg_pid = int(f.readline())
        self.password = secrets.token_hex(12)
        self.psql_su(f"CREATE ROLE bench LOGIN PASSWORD '{scram_secret(self.password, SCRAM_ITERATIONS)}'")
        self.psql_su("CREATE DATABASE bench OWNER bench")
        secret = self.psql_su("SELECT rolpassword FROM pg_authid WHERE rolname = 'bench'").strip()
        self.auth_file = f"{self.tmp}/userlist.txt"
        with open(self.auth_file, "w") as f:
            f.write(f'"bench" "{secret}"\n')
        os.chmod(self.auth_file, 0o600)
        self.backend = f"host={self.pg_sock} port={self.pg_port} dbname=bench"
        say(f"pgbench -i -s {self.a.scale}")
        r = system.run(["pgbench", "-i", "-q", "-s", str(self.a.scale), "-h", self.pg_sock, "-p",
                        str(self.pg_port), "-U", "bench", "bench"], env=self.env())
        if r.returncode:
            die(f"pgbench -i failed: {r.stderr}")

    def psql_su(self, sql):
        r = system.run(["psql", "-X", "-Atq", "-v", "ON_ERROR_STOP=1", "-h", self.pg_sock, "-p", str(self.pg_port),
                        "-U", "postgres", "-d", "postgres", "-c", sql], db=True)
        if r.returncode:
            die(f"psql: {r.stderr.strip()}")
        return r.stdout

    def env(self):
        return dict(os.environ, PGPASSWORD=self.password, PGSSLMODE="disable")

    def start_haproxy(self, frontends):
        cfg = f"{self.tmp}/haproxy.cfg"
        with open(cfg, "w") as f:
            f.write(haproxy_config(frontends))
        if system.run([self.haproxy, "-c", "-q", "-f", cfg]).returncode:
            die("haproxy -c refused haproxy.cfg")
        self.ha = self.spawn("haproxy", [self.haproxy, "-db", "-f", cfg])
        time.sleep(0.5)
        if self.ha.poll() is not None:
            die("haproxy did not start (see haproxy.log)")

    def start_harbor(self, name, port, mode, pool_size, instance_id=0, peers=None, proxy_from=()):
        """Writes NAME's config, checks it, starts it; returns (Popen, config path)."""
        sock = f"{self.tmp}/{name}"
        os.makedirs(sock, exist_ok=True)
        path = f"{self.tmp}/{name}.toml"
        with open(path, "w") as f:
            f.write(harbor_config(port, sock, instance_id, peers, mode, pool_size, self.auth_file, self.backend,
                                  proxy_from))
        r = system.run([self.bin, "check", "--config", path])
        if r.returncode:
            die(f"pgharbor check refused {name}.toml: {r.stdout}{r.stderr}")
        p = self.spawn(name, [self.bin, "--config", path, "--threads", "1", "--log-level", "warn"])
        self.wait_ready(name, port, p)
        return p, path

    def wait_ready(self, name, port, p):
        for _ in range(100):
            if p.poll() is not None:
                die(f"{name} exited at start (see {name}.log)")
            # Over its socket: a PROXY-protocol instance refuses 127.0.0.1 without a header.
            r = system.run(["psql", "-X", "-Atq", "-h", f"{self.tmp}/{name}", "-p", str(port), "-U", "bench",
                            "-d", "bench", "-c", "select 1"], env=self.env())
            if r.returncode == 0:
                return
            time.sleep(0.1)
        die(f"{name} does not answer on port {port}")

    # ----------------------------------------------------------- measuring --
    def pgbench(self, port, extra, seconds, log_name, cwd=None):
        cmd = ["pgbench", "-n", "-j", "2", "-T", str(seconds), "-h", "127.0.0.1", "-p", str(port), "-U", "bench",
               *extra, "bench"]
        r = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, cwd=cwd)
        with open(f"{self.out}/raw/{log_name}.txt", "w") as f:
            f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
        return r

    def measured(self, part, mode, cell, clients, rnd, port, extra, pids):
        """One pgbench run with the CPU of PIDS (the poolers) and HAProxy around it: a row."""
        load1 = procfs.loadavg()[1]
        before = [procfs.ticks(p) for p in pids], procfs.ticks(self.ha.pid), procfs.machine_busy(), time.time()
        r = self.pgbench(port, ["-c", str(clients), *extra], self.a.time, f"{part}_{mode}_{cell}_r{rnd}")
        after = [procfs.ticks(p) for p in pids], procfs.ticks(self.ha.pid), procfs.machine_busy(), time.time()
        rep = parse_pgbench(r.stdout)
        pool_t, ha_t = sum(after[0]) - sum(before[0]), after[1] - before[1]
        busy = after[2] - before[2]
        row = dict(part=part, mode=mode, cell=cell, clients=clients, round=str(rnd), rc=r.returncode,
                   tps=rep.tps, tx=rep.tx, failed_tx=rep.failed_tx, latency_ms=rep.latency_ms,
                   pooler_cpu_s=pool_t / self.hz, pooler_us_per_tx=us_per(pool_t, self.hz, rep.tx),
                   haproxy_us_per_tx=us_per(ha_t, self.hz, rep.tx), load1_before=load1,
                   busy_cpus=round(busy / self.hz / (after[3] - before[3]), 2))
        self.rows.append(row)
        say(f"{part} {mode} {cell} round {rnd}: {fmt(rep.tps, 0)} tps, pooler "
            f"{fmt(row['pooler_us_per_tx'], 1)} µs/tx, haproxy {fmt(row['haproxy_us_per_tx'], 1)} µs/tx")

    def warm(self, port, clients, extra=()):
        self.pgbench(port, ["-c", str(clients), *extra], self.a.warmup, f"warmup_{port}_{clients}")

    def rounds(self, part, mode, cells):
        """CELLS [(cell, clients, port, extra, pids)], interleaved over the rounds."""
        for rnd in range(1, self.a.rounds + 1):
            for cell, clients, port, extra, pids in cell_order(cells, rnd):
                self.measured(part, mode, cell, clients, rnd, port, extra, pids)

    # --------------------------------------------------------------- parts --
    def part_fleet(self, mode, fe):
        """1 instance (pool P) against 2 (P/2 each) in transaction mode; in
        session mode every instance's pool holds the most clients."""
        top = max(self.a.clients)
        one_pool, two_pool = (self.a.pool_size, max(1, self.a.pool_size // 2)) if mode == "transaction" else (top, top)
        solo, _ = self.start_harbor("solo", fe["solo"], mode, one_pool)
        peers = {2: (f"{self.tmp}/pair2", fe["pair2"]), 3: (f"{self.tmp}/pair3", fe["pair3"])}
        a, _ = self.start_harbor("pair2", fe["pair2"], mode, two_pool, 2, peers)
        b, _ = self.start_harbor("pair3", fe["pair3"], mode, two_pool, 3, peers)
        try:
            cells = []
            for c in self.a.clients:
                self.warm(fe["one"], c, ["-S"])
                self.warm(fe["two"], c, ["-S"])
                cells += [(f"1x-c{c}", c, fe["one"], ["-S"], [solo.pid]),
                          (f"2x-c{c}", c, fe["two"], ["-S"], [a.pid, b.pid])]
            self.rounds("fleet", mode, cells)
        finally:
            for p in (solo, a, b):
                self.stop(p)

    def part_proxy(self, fe):
        mode = "transaction"
        pp, _ = self.start_harbor("proxy", fe["proxy_harbor"], mode, self.a.pool_size, proxy_from=["127.0.0.1/32"])
        plain, _ = self.start_harbor("plain", fe["plain_harbor"], mode, self.a.pool_size)
        try:
            extra = ["-C", "-S"]
            self.warm(fe["proxy"], 8, extra)
            self.warm(fe["plain"], 8, extra)
            self.rounds("proxy", mode, [("send-proxy-v2", 8, fe["proxy"], extra, [pp.pid]),
                                        ("plain", 8, fe["plain"], extra, [plain.pid])])
        finally:
            self.stop(pp)
            self.stop(plain)

    def part_takeover(self, mode, connect):
        """pgbench -c 16 -l through one pgharbor; `--takeover --config SAME` at --takeover-at s."""
        name = f"tk-{mode}-{connect}"
        port = self.port()
        old, path = self.start_harbor(name, port, mode, self.a.pool_size if mode == "transaction" else 16)
        logdir, out = f"{self.tmp}/txlog-{name}", f"{self.out}/raw/takeover_{mode}_{connect}"
        os.makedirs(logdir)
        extra = ["-c", "16", "-l", f"--log-prefix={logdir}/tx"] + (["-C"] if connect == "connect" else [])
        with open(f"{out}.txt", "w") as stdout, open(f"{out}.err", "w") as stderr:
            bench = subprocess.Popen(["pgbench", "-n", "-j", "2", "-T", str(self.a.takeover_time), "-h", "127.0.0.1",
                                      "-p", str(port), "-U", "bench", *extra, "bench"], env=self.env(),
                                     stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        self.procs.append((bench, "pgbench"))
        time.sleep(self.a.takeover_at)
        t0 = time.time()
        new = self.spawn(f"{name}-new", [self.bin, "--takeover", "--config", path, "--threads", "1",
                                          "--log-level", "warn"])
        old_exit = watch_exit(old, new, bench, t0)
        self.procs = [(q, n) for q, n in self.procs if q is not bench]
        takeover_rc = new.poll()  # None: the new process took over and serves
        self.stop(new)
        self.stop(old)
        with open(f"{out}.txt") as f, open(f"{out}.err") as g:
            self.takeover_row(mode, connect, bench.returncode, f.read(), g.read(), logdir, t0, old_exit, takeover_rc)

    def takeover_row(self, mode, connect, rc, out, err, logdir, t0, old_exit, takeover_rc):
        txs = self.read_txlogs(logdir, f"{mode}_{connect}")
        inside, rest = split_window(txs, t0, t0 + self.a.window)
        (wn, wp, wm), (rn, rp, rm) = latency_stats(inside), latency_stats(rest)
        origin = min((t[1] for t in txs), default=t0)
        secs = per_second(txs, origin)
        for s, n in sorted(secs.items()):
            self.seconds.append(dict(mode=mode, connect=connect, second=s, tx=n,
                                     takeover=int(s == int(t0 - origin))))
        rep = parse_pgbench(out)
        row = dict(mode=mode, connect=connect, rc=rc, tx=rep.tx, failed_tx=rep.failed_tx,
                   aborted_clients=aborted_clients(err), connection_errors=connection_errors(err),
                   window_tx=wn, window_p99_ms=wp, window_max_ms=wm, rest_tx=rn, rest_p99_ms=rp, rest_max_ms=rm,
                   window_tps_vs_median=window_tps_ratio(secs, int(t0 - origin)), old_exit_s=old_exit,
                   takeover_rc=takeover_rc)
        self.trows.append(row)
        say(f"takeover {mode} {connect}: {rep.tx} tx, failed {rep.failed_tx}, aborted {row['aborted_clients']}, "
            f"window p99 {fmt(wp)} ms max {fmt(wm)} ms, rest p99 {fmt(rp)} ms max {fmt(rm)} ms")

    def read_txlogs(self, logdir, label):
        """Every line of pgbench's per-transaction logs, parsed; the logs are kept gzipped in raw/."""
        txs = []
        with gzip.open(f"{self.out}/raw/txlog_{label}.gz", "wt") as keep:
            for path in sorted(glob.glob(f"{logdir}/tx*")):
                with open(path) as f:
                    for line in f:
                        keep.write(line)
                        t = parse_txlog_line(line)
                        if t:
                            txs.append(t)
        return txs

    # -------------------------------------------------------------- output --
    def write(self):
        write_csv(f"{self.out}/runs.csv", RUN_FIELDS, self.rows)
        write_csv(f"{self.out}/takeover.csv", TAKEOVER_FIELDS, self.trows)
        write_csv(f"{self.out}/takeover_seconds.csv", ("mode", "connect", "second", "tx", "takeover"), self.seconds)
        with open(f"{self.out}/summary.md", "w") as f:
            f.write("\n".join(self.summary()) + "\n")
        self.written = True
        say(f"results in {self.out}")

    def summary(self):
        a = self.a
        lines = [f"# pgharbor fleet benchmarks (issue 17), {datetime.datetime.now():%F %T}", "",
                 f"{a.rounds} rounds x {a.time} s per cell (warm-up {a.warmup} s), pgbench scale {a.scale}, "
                 f"`-j 2`, SCRAM login ({SCRAM_ITERATIONS} iterations), every pgharbor `--threads 1`, "
                 f"HAProxy {haproxy_version(self.haproxy)} `mode tcp`, `balance leastconn`, no health checks. "
                 f"{os.cpu_count()} CPUs, load1 at the start {self.load_start}. Ratios compare runs of "
                 "this run; absolute figures drift between runs.", ""]
        if "fleet" in a.parts:
            lines += fleet_section(self.rows, a.modes, a.clients)
        if "takeover" in a.parts:
            lines += takeover_section(self.trows, a.window, a.takeover_time, a.takeover_at)
        if "proxy" in a.parts:
            lines += proxy_section(self.rows, self.hz)
        busy = [r for r in self.rows if r["load1_before"] > 1.5]
        if busy:
            lines.append(f"{len(busy)} of {len(self.rows)} runs started with load1 > 1.5 (other work on the machine).")
        return lines

    def run(self):
        self.load_start = procfs.loadavg()[1]
        self.prepare()
        self.start_postgres()
        fe = {k: self.port() for k in ("one", "two", "solo", "pair2", "pair3", "proxy", "plain", "proxy_harbor",
                                       "plain_harbor")}
        self.start_haproxy([("one", fe["one"], [("solo", fe["solo"], False)]),
                            ("two", fe["two"], [("pair2", fe["pair2"], False), ("pair3", fe["pair3"], False)]),
                            ("proxy", fe["proxy"], [("proxy", fe["proxy_harbor"], True)]),
                            ("plain", fe["plain"], [("plain", fe["plain_harbor"], False)])])
        if "fleet" in self.a.parts:
            for m in self.a.modes:
                self.part_fleet(m, fe)
        if "takeover" in self.a.parts:
            for m in self.a.modes:
                for c in ("persistent", "connect"):
                    self.part_takeover(m, c)
        if "proxy" in self.a.parts:
            self.part_proxy(fe)
        self.write()


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


def haproxy_version(binary):
    r = system.run([binary, "-v"])
    return r.stdout.split()[2] if r.returncode == 0 and len(r.stdout.split()) > 2 else "?"


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r[k]) for k in fields})


def csv_list(kind, choices=None):
    def parse(text):
        xs = [kind(x) for x in text.split(",") if x]
        if choices and any(x not in choices for x in xs):
            raise argparse.ArgumentTypeError(f"choose from {','.join(choices)}")
        return xs
    return parse


def options(argv):
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


def main(argv=None):
    args = options(sys.argv[1:] if argv is None else argv)
    system.clean_environment()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    fleet = Fleet(args)
    try:
        fleet.run()
        return 0
    except Die as e:
        sys.stderr.write(f"ERROR: {e}\n")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not fleet.written and (fleet.rows or fleet.trows):
            say("interrupted: writing the runs made so far")
            fleet.write()
        fleet.cleanup()


if __name__ == "__main__":
    sys.exit(main())
