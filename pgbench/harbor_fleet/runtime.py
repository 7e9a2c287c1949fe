"""The run's processes: its temp dir, the throwaway PostgreSQL, HAProxy and
the pgharbors, each started, checked and stopped by pid; cleanup keeps their
logs and configs in raw/."""

import datetime
import glob
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time

from harbor_bench import procfs, system
from harbor_bench.util import die, free_port, say, scram_secret

from .configs import harbor_config, haproxy_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAM_ITERATIONS = 16
PORT_BASE = 23432


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
        self.haproxy = system.find_haproxy() or (inst.install("haproxy") and system.find_haproxy())
        if not self.haproxy:
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
