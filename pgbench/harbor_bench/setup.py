"""Getting ready: what is missing installed, pgharbor built, ports chosen,
and the poolers configured and started (pgharbor, pgharbor-base, PgBouncer,
the no-TLS pgharbor, the HAProxy relay) or found (--pooler), each as a row
of the target table.
"""

import datetime
import glob
import os
import re
import shutil
import subprocess

from . import peer, procfs, system, tlsauth
from .postgres import find_listener, probe_server, probe_transports, tail
from .model import persistent_clients
from .targets import SPECS, start_bouncer, start_failure, start_harbor, start_haproxy, stop, wait_ready, \
    write_bouncer_config, write_harbor_config, write_pooler_hba
from .util import die, free_port, say, warn


def install_missing(h):
    """PostgreSQL, its client, openssl, make (for a build), PgBouncer and gnuplot, when missing
    (a missing PgBouncer or gnuplot is skipped rather than fatal)."""
    s = h.s
    peer.check_possible(s)
    tlsauth.check_possible(s)
    inst = system.Installer(s.install)
    pkgs = []
    if h.own_pg and not system.find_pg_bindir():
        pkgs.append("postgresql")
    if not (shutil.which("psql") and shutil.which("pgbench")):
        pkgs.append("postgresql-client")
    if not shutil.which("openssl"):
        pkgs.append("openssl")
    if s.build and "pgharbor" not in s.skip:
        pkgs += build_packages()
    if pkgs:
        if not s.install:
            die(f"missing: {' '.join(pkgs)} (--no-install: install them, then rerun)")
        inst.install(*pkgs)
    if "pgbouncer" not in s.skip and not system.find_pgbouncer():
        if not inst.install("pgbouncer") or not system.find_pgbouncer():
            warn("PgBouncer could not be installed" + ("" if s.install else " (--no-install)")
                 + ": continuing without it")
            s.skip.add("pgbouncer")
    if s.haproxy and not system.find_haproxy():
        if not inst.install("haproxy") or not system.find_haproxy():
            warn("HAProxy could not be installed" + ("" if s.install else " (--no-install)")
                 + ": the persistent cells run without the relay reference")
            s.skip.add("haproxy")
    if s.plot and not shutil.which("gnuplot"):
        if not inst.install("gnuplot-nox") or not shutil.which("gnuplot"):
            warn("gnuplot could not be installed: no plots (the .dat and .gp files are still written)")
            s.plot = False
    if s.build and "pgharbor" not in s.skip and not shutil.which("cargo"):
        die("cargo not found: install Rust (https://rustup.rs) first, or give --pgharbor-bin")
    if system.IS_ROOT and (h.own_pg or "pgbouncer" not in s.skip) and not system.db_user_exists():
        die("running as root but there is no 'postgres' OS user to run PostgreSQL and PgBouncer as")
    h.pg_bin = system.find_pg_bindir() if h.own_pg else None
    if h.own_pg and not h.pg_bin:
        die("PostgreSQL server binaries (initdb, postgres, pg_ctl) not found")
    h.bouncer_bin = system.find_pgbouncer() if "pgbouncer" not in s.skip else None
    h.haproxy_bin = system.find_haproxy() if s.haproxy else None
    if s.peer:
        peer.ensure_os_user()


def build_packages():
    """What a release build needs beyond Rust and a C compiler, when missing: make
    (tikv-jemalloc-sys builds jemalloc), cmake and g++ (aws-lc-sys builds AWS-LC,
    the default TLS library) and libclang (its libssl bindings are generated)."""
    pkgs = [p for p in ("make", "cmake", "g++") if not shutil.which(p)]
    if not (glob.glob("/usr/lib/llvm-*/lib/libclang.so*") or glob.glob("/usr/lib/*/libclang-*.so*")):
        pkgs.append("libclang-dev")
    return pkgs


def built_at(path):
    return datetime.datetime.fromtimestamp(os.path.getmtime(path)).strftime("%F %T")


def build(h, root):
    """cargo build --release, unless --pgharbor-bin or --no-build; and how the binary came to be."""
    s = h.s
    h.harbor_bin = s.harbor_bin or f"{root}/target/release/pgharbor"
    rev = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip() or "?"
    h.harbor_build = "not run"
    if "pgharbor" not in s.skip:
        if s.build:
            say("building pgharbor: cargo build --release")
            if subprocess.run(["cargo", "build", "--release"], cwd=root, stdout=2).returncode != 0:
                die("cargo build --release failed")
            h.harbor_build = f"built from {rev}"
        elif s.harbor_bin:
            h.harbor_build = f"--pgharbor-bin {h.harbor_bin}, built {built_at(h.harbor_bin)} (tree now at {rev})"
            if "/debug/" in h.harbor_bin:
                h.harbor_build += " — a debug build: its figures say nothing about a release build"
        else:
            if not os.access(h.harbor_bin, os.X_OK):
                die(f"{h.harbor_bin} not found (drop --no-build?)")
            h.harbor_build = f"existing binary built {built_at(h.harbor_bin)} (--no-build; tree now at {rev})"
        if not os.access(h.harbor_bin, os.X_OK):
            die(f"{h.harbor_bin} not found after the build")
    if s.with_base:
        h.base_build = f"--baseline-bin {s.base_bin}, built {built_at(s.base_bin)}"
        if "/debug/" in s.base_bin:
            h.base_build += " — a debug build: its figures say nothing about a release build"


def pre_estimate(s):
    """A first estimate in minutes, before installing and building (bulk at
    ~200 MB/s of 96 MB per copy at scale 10)."""
    ntr = len(s.plain_transports) + (len(s.certs) if s.with_tls else 0) + len(s.auth_cells)
    npool = ("pgharbor" not in s.skip) + s.with_base + ("pgbouncer" not in s.skip) + bool(s.pooler)
    ntg = npool + ("direct" not in s.skip)
    secs = 0
    for w in s.workloads:
        runs = ntr * ntg + ("notls" not in s.skip and w in ("connect", "establish")) * \
            len({"unix", peer.TRANSPORT} & set(s.plain_transports))
        runs += (s.haproxy and bool(persistent_clients(w))) * len({"unix", "tcp"} & set(s.plain_transports))
        per = {"bulk": s.bulk_copies * s.scale // 20 + 5, "bulkselect": s.bulk_selects * s.scale // 20 + 5}
        secs += runs * per.get(w, s.time * 10 + 5)
    # idle clients: ~0.5 ms per plain login, ~2.5 ms per TLS login, 2 s to settle
    idle = npool * (s.idle_clients * 3 // 1000 + (4 if s.idle_clients > 0 else 0))
    return (s.rounds * secs // 10 + 40 + idle + 59) // 60


def choose_ports(h):
    """The given ports, else the first free ones from 20432 / 21432 / 22432 (below
    32768: ports above collide with the kernel's ephemeral ports);
    pgharbor-base: the first free one after pgharbor's that no other has;
    HAProxy (when it runs): the first free one from 23432 that no other has."""
    s, p = h.s, h.s.ports
    h.pg_port = (p["pg"] or free_port(20432)) if h.own_pg else None
    h.harbor_port = p["pgharbor"] or free_port(21432)
    h.bouncer_port = p["pgbouncer"] or free_port(22432)
    if h.own_pg and h.pg_port in (h.harbor_port, h.bouncer_port):
        die(f"ports must differ: PostgreSQL {h.pg_port}, pgharbor {h.harbor_port}, PgBouncer {h.bouncer_port}")
    if h.harbor_port == h.bouncer_port:
        die(f"ports must differ: pgharbor {h.harbor_port}, PgBouncer {h.bouncer_port}")
    h.base_port = p["pgharbor-base"]
    if s.with_base and not h.base_port:
        h.base_port = free_port_besides(h.harbor_port + 1, (h.bouncer_port, h.pg_port))
    if s.with_base and h.base_port in (h.harbor_port, h.bouncer_port, h.pg_port):
        die(f"ports must differ: pgharbor-base {h.base_port}, pgharbor {h.harbor_port}, PgBouncer "
            f"{h.bouncer_port}, PostgreSQL {h.pg_port or '?'}")
    if s.haproxy:
        h.haproxy_port = free_port_besides(23432, (h.harbor_port, h.base_port, h.bouncer_port, h.pg_port))


def free_port_besides(start, taken):
    """The first free port from START that is none of TAKEN."""
    port = free_port(start)
    while port in taken:
        port = free_port(port + 1)
    return port


def pool_target(h, name, port, serves, binary=""):
    """A pooler this run starts: its row in the target table."""
    return h.add_target(name, sock=f"{h.tmp}/{SPECS[name].sock}", host="127.0.0.1", port=str(port),
                        user=h.bench_user, db=h.bench_db, pw=h.direct.pw, serves=serves, binary=binary)


def served(s, *transports):
    """TRANSPORTS, with unix-peer after unix when that cell runs."""
    out = list(transports)
    if s.peer and "unix" in out:
        out.insert(out.index("unix") + 1, peer.TRANSPORT)
    return out


def start_harbor_target(h, name, port, binary):
    """pgharbor or pgharbor-base: configured, started and ready, or failed with its reason."""
    t = pool_target(h, name, port, served(h.s, "unix", "tcp", "tcp-tls"), binary)
    err = write_harbor_config(h, name, h.cur_cert)
    if err:
        what = "check refused the configuration" if name == "pgharbor" else "check refused pgharbor's configuration"
        t.failed = f"{name} {what}: {next((x for x in err.splitlines() if x), 'no output')}"
    else:
        start_harbor(h, name)
        if not wait_ready(t):
            warn(tail(f"{h.tmp}/{name}.log", 30))
            t.failed = f"{name} did not start: {start_failure(t, f'{h.tmp}/{name}.log')}"
    if t.failed:
        # Reported as a failed target in every cell; the others still run.
        warn(t.failed)
        warn(f"{name} is recorded as failed in every cell; the other targets run")
        stop(t)
    return t


def start_pooler_targets(h):
    """pgharbor, pgharbor-base, PgBouncer, the no-TLS pgharbor, --pooler: in the table's order."""
    s = h.s
    with open(f"{h.tmp}/userlist.txt", "w") as f:
        f.write(userlist_line(h))
    os.chmod(f"{h.tmp}/userlist.txt", 0o600)
    if s.hba:
        write_pooler_hba(h, f"{h.tmp}/pgharbor-hba.conf")
        write_pooler_hba(h, f"{h.tmp}/pgharbor-notls-hba.conf", tls=False)
    if "pgharbor" not in s.skip:
        h.harbor_version = subprocess.run([h.harbor_bin, "--version"], capture_output=True, text=True).stdout.strip()
        say(f"pgharbor on 127.0.0.1:{h.harbor_port} and {h.tmp}/harbor ({s.pool_mode} pooling, TLS: "
            f"{h.cur_cert} certificate)")
        if start_harbor_target(h, "pgharbor", h.harbor_port, h.harbor_bin).failed:
            s.skip.add("notls")
    if s.with_base:
        p = subprocess.run([h.base_bin, "--version"], capture_output=True, text=True)
        h.base_version = p.stdout.strip() if p.returncode == 0 else "version unknown"
        say(f"pgharbor-base (--baseline-bin) on 127.0.0.1:{h.base_port} and {h.tmp}/harbor-base "
            "(pgharbor's configuration)")
        start_harbor_target(h, "pgharbor-base", h.base_port, h.base_bin)
    if "pgbouncer" not in s.skip:
        start_bouncer_target(h)
    if "notls" not in s.skip and {"unix", peer.TRANSPORT} & set(s.plain_transports):
        start_notls(h)
    if s.pooler:
        external_pooler(h)
    if s.haproxy:
        start_haproxy_target(h)
    if not h.targets:
        die("no target left to run")


def userlist_line(h):
    """The auth file both poolers read: "user" "secret", quotes doubled as PgBouncer wants."""
    q = '""'
    return f'"{h.bench_user.replace(chr(34), q)}" "{h.secret.replace(chr(34), q)}"\n'


def start_bouncer_target(h):
    s = h.s
    say(f"PgBouncer on 127.0.0.1:{h.bouncer_port} and {h.tmp}/pgbouncer ({s.pool_mode} pooling, TLS: "
        f"{h.cur_cert} certificate)")
    b = pool_target(h, "pgbouncer", h.bouncer_port, served(s, "unix", "tcp", "tcp-tls"))
    if s.hba:
        write_pooler_hba(h, f"{b.sock}/pgbouncer-hba.conf")
    write_bouncer_config(h, h.cur_cert)
    with open(f"{b.sock}/userlist.txt", "w") as f:
        f.write(userlist_line(h) + (peer.bouncer_userlist_line() if s.peer else "")
                + (tlsauth.bouncer_userlist_line() if s.cert else ""))
    os.chmod(f"{b.sock}/userlist.txt", 0o600)
    system.give_to_db(b.sock)
    p = subprocess.run([h.bouncer_bin, "--version"], capture_output=True, text=True)
    h.bouncer_version = ((p.stdout + p.stderr).splitlines() or [""])[0]
    if not start_bouncer(h):
        warn(tail(f"{h.tmp}/pgbouncer.log", 20))
        warn("PgBouncer did not start: continuing without it")
        stop(b)
        del h.targets["pgbouncer"]
        s.skip.add("pgbouncer")


def start_haproxy_target(h):
    """The relay reference: ready, or dropped with a warning (the poolers still run)."""
    say(f"HAProxy (TCP relay, no pooling) on 127.0.0.1:{h.haproxy_port} and {h.tmp}/haproxy, "
        "in the persistent cells")
    t = pool_target(h, "haproxy", h.haproxy_port, [x for x in ("unix", "tcp") if x in h.s.plain_transports])
    t.user, t.pw = h.direct.user, h.direct.pw
    h.haproxy_version = "HAProxy " + system.haproxy_version(h.haproxy_bin)
    if not start_haproxy(h, h.haproxy_bin):
        warn(tail(f"{h.tmp}/haproxy.log", 20))
        warn("HAProxy did not start: continuing without it")
        stop(t)
        del h.targets["haproxy"]
        h.s.skip.add("haproxy")


def start_notls(h):
    say(f"second pgharbor without [tls] on {h.tmp}/harbor-notls only (the socket's no-TLS reference)")
    t = pool_target(h, "pgharbor-notls", h.harbor_port, served(h.s, "unix"), h.harbor_bin)
    t.host = ""
    err = write_harbor_config(h, "pgharbor-notls", "")
    if err:
        die(f"pgharbor check rejected the no-TLS pgharbor's configuration: {err}")
    start_harbor(h, "pgharbor-notls")
    if not wait_ready(t):
        die(f"the no-TLS pgharbor did not start: {tail(f'{h.tmp}/pgharbor-notls.log', 30)}")


def external_pooler(h):
    """--pooler: a pooler someone else runs, in pgharbor's place."""
    from .parse import quote_value
    s, e = h.s, h.s.pooler
    t = h.add_target("pooler", pw=e.password or h.direct.pw, extra=e.rest)
    # Its user and database default to --pg's, not to libpq's defaults.
    kv = (e.rest + " " if e.rest else "") + \
        f"user={quote_value(e.user or h.bench_user)} dbname={quote_value(e.dbname or h.bench_db)}"
    kv += f" host={quote_value(e.host)}" if e.host else ""
    kv += f" port={e.port}" if e.port else ""
    say("existing pooler (--pooler): connecting")
    probe_server(h, t, kv)
    probe_transports(h, t)
    if not t.serves:
        die("--pooler: it answers over none of unix, tcp, tcp-tls")
    pid = s.pooler_pid
    if not pid and t.sock:
        pid = find_listener(sock_file=f"{t.sock}/.s.PGSQL.{t.port}")
    elif not pid and re.match(r"^(127\.|localhost$|::1$)", t.host):
        pid = find_listener(port=t.port)
    if pid and not procfs.alive(pid):
        warn(f"--pooler: no process {pid}: its CPU time and memory are not measured")
        pid = None
    t.pid = pid
    h.pooler_desc = (f"--pooler host={t.sock or t.host} port={t.port} user={t.user} dbname={t.db}; "
                     f"transports: {' '.join(t.serves)}; ")
    h.pooler_desc += (f"process {pid} ({procfs.comm(pid)})" if pid else
                      "process not found: CPU time and memory not measured, its CPU counted as other processes'")
