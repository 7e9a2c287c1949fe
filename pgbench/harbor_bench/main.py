"""The run from start to finish: settings, install, build, temp dir and
certificates, PostgreSQL, the poolers, warm-up, the rounds, pgharbor's
report, idle-client memory, the outputs; and, however it ends, the cleanup
of every server and directory it made.
"""

import datetime
import hashlib
import os
import shutil
import signal
import sys
import tempfile

from . import cli, postgres, procfs, report, rounds, system, tlsauth
from .cli import CERT_USER
from .model import CSV_HEADER
from .setup import build, choose_ports, install_missing, pre_estimate, start_pooler_targets
from .targets import SPECS, Target, restart, stop, tls_info, use_cert
from .util import Die, die, say, warn
from .workloads import estimate_tenths, warmup

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Harness:
    """The state of one run, shared by the steps."""
    BULK_QUERY = "select * from pgbench_accounts"

    def __init__(self, s):
        self.s = s
        self.caller_pgpassword = os.environ.get("PGPASSWORD", "")
        self.targets = {}  # name -> Target, in the table's order
        self.tmp = self.out = ""
        self.pg_pid = None
        self.own_pg = s.pg is None
        self.pg_notes, self.tls_info, self.crashes = [], [], []
        self.cur_cert = s.certs[0]
        self.ncpu = os.cpu_count()
        self.idle_fresh = True
        self.harbor_version = self.harbor_build = self.harbor_sha = ""
        self.base_version = self.base_build = self.base_sha = ""
        self.bouncer_version = self.pooler_desc = self.haproxy_version = ""
        self.haproxy_bin, self.haproxy_port = None, None
        self.bulk_rows = self.bulk_bytes = 0

    def add_target(self, name, **kw):
        """Adds NAME, keeping the table's order."""
        if self.s.cert:
            kw.setdefault("client_cert", tlsauth.client_cert(self.tmp))
        self.targets[name] = Target(SPECS[name], **kw)
        order = list(SPECS)
        self.targets = dict(sorted(self.targets.items(), key=lambda kv: order.index(kv[0])))
        return self.targets[name]

    def live(self):
        return {n for n, t in self.targets.items() if not t.failed}

    def live_targets(self):
        return [t for t in self.targets.values() if not t.failed]

    def pooler_pids(self):
        return [t.pid for t in self.targets.values() if t.spec.kind != "postgres" and t.pid]

    def psql_su(self, sql, at=False):
        """SQL as the superuser over the throwaway cluster's socket."""
        cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
               f"host={self.pg_sock} port={self.pg_port} user=postgres dbname=postgres"]
        p = system.run(cmd + (["-At", "-c", sql] if at else []), stdin=None if at else sql)
        if p.returncode != 0:
            die(f"psql as postgres: {p.stderr.strip()}")
        return p.stdout.strip()

    def progress_line(self, text):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def ensure_pooler(self, name, where):
        """Restarts a pgharbor that died (the crash is recorded), so later cells still run."""
        t = self.targets[name]
        if t.spec.kind != "pgharbor" or t.failed or not t.pid or procfs.alive(t.pid):
            return
        rc = t.proc.wait() if t.proc else "?"
        self.crashes.append(f"{name} (pid {t.pid}) exited with status {rc} before {where}")
        warn(f"{self.crashes[-1]}; last log lines:\n{postgres.tail(f'{self.tmp}/{name}.log', 20)}")
        restart(self, name, f"restarting {name}")
        if not procfs.alive(t.pid):
            die(f"{name} did not restart")

    # ------------------------------------------------------------ cleanup --
    def cleanup(self):
        for t in self.targets.values():
            stop(t)
        if self.own_pg and self.pg_pid and procfs.alive(self.pg_pid):
            p = system.run([f"{self.pg_bin}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "30", "-s",
                            "stop"], db=True)
            if p.returncode != 0:
                system.stop_pid(self.pg_pid, signal.SIGQUIT)
        self.save_logs()
        if self.tmp and os.path.isdir(self.tmp):
            if self.s.keep:
                say(f"kept {self.tmp}")
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)

    def save_logs(self):
        if not (self.out and os.path.isdir(self.out) and self.tmp):
            return
        os.makedirs(f"{self.out}/logs", exist_ok=True)
        for f in ("pgharbor.log", "pgharbor-notls.log", "pgharbor-base.log", "pgbouncer.log", "pg/postgres.log",
                  "pgbench-init.log", "pgharbor.toml", "pgharbor-notls.toml", "pgharbor-base.toml",
                  "pgharbor-hba.conf", "pgbouncer/pgbouncer.ini", "pgbouncer/pgbouncer-hba.conf"):
            if os.path.isfile(f"{self.tmp}/{f}"):
                shutil.copy(f"{self.tmp}/{f}", f"{self.out}/logs/")


def make_dirs(h):
    """The temp dir (reachable by the postgres user) and the results dir."""
    h.tmp = tempfile.mkdtemp(prefix="pgharbor-bench.", dir=os.environ.get("TMPDIR", "/tmp"))
    os.chmod(h.tmp, 0o755)
    if system.IS_ROOT and (h.own_pg or "pgbouncer" not in h.s.skip) and not system.db_can_enter(h.tmp):
        die(f"{h.tmp} is not reachable by the postgres user: set TMPDIR to a world-traversable directory")
    h.pgdir, h.ssl = f"{h.tmp}/pg", f"{h.tmp}/pg/ssl"
    h.data, h.pg_sock = f"{h.pgdir}/data", f"{h.pgdir}/sock"
    for d in (h.pg_sock, h.ssl, *(f"{h.tmp}/{s.sock}" for s in SPECS.values() if s.sock)):
        os.makedirs(d, exist_ok=True)
    for d in (h.pgdir, h.pg_sock, h.ssl, *(f"{h.tmp}/{s.sock}" for s in SPECS.values() if s.sock)):
        os.chmod(d, 0o755)
    h.stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H%M%S")
    h.out = os.path.abspath(h.s.out or f"{ROOT}/results/{h.stamp}")
    os.makedirs(f"{h.out}/runs", exist_ok=True)
    h.bulk_sql = f"{h.tmp}/bulk.sql"


def copy_binary(h, src, name):
    """The measured binary is a copy: a rebuild of target/release by someone else
    during the run (the machine is shared) cannot swap it under a restart."""
    dst = f"{h.tmp}/{name}"
    shutil.copy2(src, dst)
    with open(dst, "rb") as f:
        return dst, hashlib.sha256(f.read()).hexdigest()[:12]


def certificates(h):
    """Self-signed server certificates; every target serves the same one at a time."""
    # The tlsauth cells are served the ECDSA certificate, --cert rsa or not.
    for c in h.s.certs + (["ecdsa"] if h.s.auth_cells and "ecdsa" not in h.s.certs else []):
        say(f"TLS certificate {c} (self-signed {system.CERT_DESC[c]})")
        system.make_cert(c, h.ssl)
    if h.s.cert:
        say(f"client CA and client certificate CN={CERT_USER} (ECDSA P-256) for the {tlsauth.CERT} cell")
        tlsauth.make_pki(h.tmp)
    system.give_to_db(h.pgdir)


def run(h):
    s = h.s
    say(f"estimated duration: about {pre_estimate(s)} min (plus installing and building if needed)")
    install_missing(h)
    build(h, ROOT)
    make_dirs(h)
    if "pgharbor" not in s.skip:
        h.harbor_bin, h.harbor_sha = copy_binary(h, h.harbor_bin, "pgharbor")
    if s.with_base:
        h.base_bin, h.base_sha = copy_binary(h, s.base_bin, "pgharbor-base")
        if h.base_sha == h.harbor_sha:
            warn(f"--baseline-bin is the same binary as pgharbor's (sha256 {h.base_sha}…)")
    raw, idle_csv = f"{h.out}/raw.csv", f"{h.out}/idle.csv"
    if os.path.exists(idle_csv):
        os.remove(idle_csv)
    choose_ports(h)
    certificates(h)
    h.direct = h.add_target("direct")
    postgres.start_own(h) if h.own_pg else postgres.use_existing(h)
    h.setup_conn = h.direct.conninfo(h.direct.serves[0])
    postgres.init_tables(h)
    postgres.bulk_setup(h)
    if "direct" in s.skip:
        del h.targets["direct"]  # still the setup connection, not a target
    start_pooler_targets(h)
    measure(h, raw, idle_csv)


def measure(h, raw, idle_csv):
    """Warm-up, TLS facts, the rounds, pgharbor's report, idle clients, outputs."""
    s = h.s
    h.ncpu = os.cpu_count()
    h.load_at_start, _ = procfs.loadavg()
    with open(raw, "w") as f:
        f.write(CSV_HEADER + "\n")
    n = sum(1 for w in s.workloads for t in s.transports for g in h.targets.values() if g.runs(t, w))
    est = sum(estimate_tenths(h, w) for w in s.workloads for t in s.transports for g in h.targets.values()
              if g.runs(t, w))
    say(f"targets: {' '.join(h.targets)}; transports: {' '.join(s.transports)}; workloads: {' '.join(s.workloads)}")
    say(f"{s.rounds} round(s) x {n} runs: estimated {(s.rounds * est + 599) // 600} min from now; "
        f"load now: {h.load_at_start}")
    if s.warmup > 0:
        warmup(h)
    if s.with_tls:
        for c in s.certs:
            use_cert(h, c)
            h.tls_info += [tls_info(h, t) for t in h.live_targets() if t.runs("tcp-tls")]
    rounds.run_rounds(h, raw)
    for name in ("pgharbor", "pgharbor-notls", "pgharbor-base"):
        if name in h.targets and h.targets[name].pid:
            h.ensure_pooler(name, "the end of the runs")
    report.overhead_report(h)
    if s.idle_clients > 0:
        rounds.run_idle(h, idle_csv)
    report.write_outputs(h, raw, idle_csv)


def main(argv):
    try:
        s = cli.resolve(argv)
    except Die as e:
        sys.stderr.write(f"ERROR: {e}\n")
        return 1
    if s.print_config:
        print("\n".join(cli.config_lines(s)))
        return 0
    system.clean_environment()
    h = Harness(s)
    # SIGTERM and SIGINT end the run through the cleanup below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    try:
        system.raise_fd_limit(s.fd_limit)
        if s.idle_clients > 0 and system.fd_soft_limit() < s.fd_limit:
            warn(f"open-files limit {system.fd_soft_limit()} < {s.fd_limit}: not every idle client may connect "
                 "(run as root, or raise ulimit -Hn)")
        run(h)
        return 0
    except Die as e:
        sys.stderr.write(f"ERROR: {e}\n")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        h.cleanup()
