"""The targets as a data table, and what the harness does with one: its
connection strings, the poolers' configs, starting, stopping, waiting until
it answers, and switching every target to another certificate.

The table's order is the order targets run in within a cell (reversed in
even rounds); a target that cannot start keeps its place and is recorded as
failed in every cell, so the others still run.
"""

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import List, Optional

from . import peer, procfs, system, tlsauth
from .cli import CERT_USER, PEER_USER
from .model import persistent_clients
from .parse import first_match, quote_value, ssl_info, toml_quote
from .util import die, say, warn


@dataclass(frozen=True)
class Spec:
    """A kind of target: KIND says how it is run; SOCK names its socket
    directory under the temp dir; TRANSPORTS and WORKLOADS restrict its cells
    (None = all); PERSISTENT: only the persistent workloads (persistentN,
    tpcbN); MODE: it runs in --pool-mode."""
    name: str
    kind: str  # postgres | pgharbor | pgbouncer | external | haproxy
    sock: str = ""
    tls: bool = True
    transports: Optional[tuple] = None
    workloads: Optional[tuple] = None
    persistent: bool = False
    mode: bool = False


TARGET_TABLE = (
    Spec("direct", "postgres"),
    Spec("pgharbor", "pgharbor", sock="harbor", mode=True),
    # --baseline-bin: the other build, pgharbor's configuration on its own port and socket.
    Spec("pgharbor-base", "pgharbor", sock="harbor-base", mode=True),
    Spec("pgbouncer", "pgbouncer", sock="pgbouncer", mode=True),
    # A second pgharbor with no [tls]: what configuring TLS costs socket logins.
    Spec("pgharbor-notls", "pgharbor", sock="harbor-notls", tls=False, transports=("unix", "unix-peer"),
         workloads=("connect", "establish"), mode=True),
    Spec("pooler", "external"),
    # A relay that parses nothing, one server connection per client: what
    # moving a transaction's bytes through a third process costs at least.
    # Not a pooler, so only where a pooler keeps one connection per client too.
    Spec("haproxy", "haproxy", sock="haproxy", tls=False, transports=("unix", "tcp"), persistent=True),
)
SPECS = {s.name: s for s in TARGET_TABLE}


@dataclass
class Target:
    """A target of this run: how to reach it, and its process when it is ours."""
    spec: Spec
    sock: str = ""
    host: str = ""
    port: str = ""
    user: str = ""
    db: str = ""
    pw: str = ""
    extra: str = ""       # further key=value pairs (from --pg or --pooler)
    serves: List[str] = field(default_factory=list)  # unix, unix-peer, tcp, tcp-tls
    pid: Optional[int] = None
    proc: Optional[subprocess.Popen] = None
    binary: str = ""
    failed: str = ""      # why it could not start
    client_cert: str = ""  # tcp-tls-cert: the client certificate's path without .crt/.key

    @property
    def name(self):
        return self.spec.name

    def conninfo(self, transport):
        """The libpq connection string pgbench and psql use (unix-peer: the socket, as PEER_USER;
        tcp-tls-cert: as CERT_USER with its client certificate; tcp-tls-nocb: channel_binding=disable)."""
        user = {peer.TRANSPORT: PEER_USER, tlsauth.CERT: CERT_USER}.get(transport, self.user)
        base = (self.extra + " " if self.extra else "") + \
            f"user={quote_value(user)} dbname={quote_value(self.db)}"
        if transport in ("unix", peer.TRANSPORT):
            return f"{base} host={quote_value(self.sock)} port={self.port}"
        mode = "disable" if transport == "tcp" else "require"
        return (f"{base} host={quote_value(self.host)} port={self.port} sslmode={mode}"
                + tlsauth.conninfo_extra(transport, self.client_cert))

    def env(self, transport=None, **extra):
        """The client's environment. unix-peer and tcp-tls-cert get no password: a
        target that asked for one would then fail the login instead of quietly measuring SCRAM."""
        env = dict(os.environ, PGPASSWORD=self.pw, **extra)
        if transport in (peer.TRANSPORT, tlsauth.CERT):
            del env["PGPASSWORD"]
        return env

    @staticmethod
    def argv(transport, cmd):
        """CMD as run over TRANSPORT: as OS user PEER_USER over unix-peer."""
        return peer.as_peer(cmd) if transport == peer.TRANSPORT else cmd

    def runs(self, transport, workload=None):
        """Whether this target is measured over TRANSPORT (in WORKLOAD)."""
        base = "tcp-tls" if transport.startswith("tcp-tls") else transport
        if base not in self.serves:
            return False
        if transport == tlsauth.CERT and self.spec.kind == "external":
            return False  # --pooler: its rules and CA are not ours to give bench_cert a cert line
        if workload is None:
            return True
        if self.spec.persistent and not persistent_clients(workload):
            return False
        return self.spec.workloads is None or workload in self.spec.workloads

    def mode(self, pool_mode):
        return pool_mode if self.spec.mode else ""


def psql_ok(target, transport, err_lines=None):
    """One SELECT 1 works; the reason when not."""
    p = system.run(target.argv(transport, ["psql", "-X", "-Atq", target.conninfo(transport), "-c", "SELECT 1"]),
                   env=target.env(transport, PGCONNECT_TIMEOUT="5"))
    return p.returncode == 0, p.stderr.strip()


def wait_ready(target, transports=None):
    """Waits until TARGET answers a query over every transport it serves (TLS:
    the current certificate); gives up after 10 s per transport or when its
    process dies."""
    for t in transports or target.serves:
        for i in range(101):
            ok, err = psql_ok(target, t)
            if ok:
                break
            if (target.pid and not procfs.alive(target.pid)) or i >= 100:
                warn(f"{target.name} does not answer over {t}: {err}")
                return False
            time.sleep(0.1)
    return True


def harbor_config(h, name, cert):
    """pgharbor's config; CERT empty = no [tls]. pgharbor-base gets
    pgharbor's, on its own port and socket directory."""
    t = h.targets[name]
    if name == "pgharbor-notls":
        listen = f'[listen]\naddresses = []\nport = {t.port}\nunix_socket_dir = "{t.sock}"\n'
    else:
        listen = f'[listen]\naddresses = ["127.0.0.1"]\nport = {t.port}\nunix_socket_dir = "{t.sock}"\n'
    tls = ""
    if cert:
        tls = (f'\n[tls]\ncert_file = "{h.ssl}/{cert}.crt"\nkey_file = "{h.ssl}/{cert}.key"\n'
               'sslmode = "prefer"            # TCP clients may use TLS\n'
               'socketsslmode = "disable"     # the Unix socket stays plain\n')
        if h.s.cert:
            tls += f'ca_file = "{tlsauth.ca_file(h.tmp)}"  # TLS clients are asked for a certificate\n'
    auth_file = "" if h.auth_method == "trust" else f'auth_file = "{h.tmp}/userlist.txt"'
    if h.s.hba:
        # The unix-peer / tcp-tls-cert cells: the rules (peer or cert for their
        # roles, auth.method's for the rest) replace auth.method. Without [tls]
        # a cert line is refused, so pgharbor-notls gets the rules without it.
        hba = "pgharbor-notls-hba.conf" if not cert else "pgharbor-hba.conf"
        auth = f'[auth]\nhba_file = "{h.tmp}/{hba}"\n{auth_file}\n'
    else:
        auth = f'[auth]\nmethod = "{h.auth_method}"\n{auth_file}\n'
    return (listen + tls + '\n' + auth
            + f'\n[pool]\nmode = "{h.s.pool_mode}"\ndefault_pool_size = {h.s.pool_size}\n'
            f'max_client_conn = {h.s.max_client_conn}\n'
            f'\n[databases.{toml_quote(h.bench_db)}]\nconninfo = {toml_quote(backend_conninfo(h))}\n'
            f'\n[admin]\nusers = [{toml_quote(h.bench_user)}]             '
            '# pgbench/run reads SHOW OVERHEAD at the end\n')


def backend_conninfo(h):
    """The poolers' way to PostgreSQL. With the unix-peer cell, user= and
    password= of bench: its clients (role PEER_USER) then share bench's pool,
    one pool per (database, backend user) in both poolers, and the backend
    login does not depend on how the client logged in."""
    if not h.s.hba:
        return h.backend_kv
    return f"{h.backend_kv} user={quote_value(h.bench_user)} password={quote_value(h.direct.pw)}"


def write_pooler_hba(h, path, tls=True):
    """The pg_hba-format rules of a pooler in the unix-peer / tcp-tls-cert cells
    (readable by PgBouncer's OS user); TLS False: no cert line (pgharbor-notls)."""
    with open(path, "w") as f:
        f.write(peer.pooler_hba(h.auth_method, h.s.peer, tlsauth.CERT_LINE if h.s.cert and tls else ""))
    os.chmod(path, 0o644)


def write_harbor_config(h, name, cert):
    """Writes NAME's config if `pgharbor check` accepts it; else returns its words."""
    path = f"{h.tmp}/{name}.toml"
    with open(path + ".new", "w") as f:
        f.write(harbor_config(h, name, cert))
    p = system.run([h.targets[name].binary, "check", "--config", path + ".new"])
    if p.returncode != 0:
        return (p.stdout + p.stderr).replace(h.tmp + "/", "")
    os.replace(path + ".new", path)
    return None


def start_harbor(h, name):
    """Starts pgharbor instance NAME with its config, as the invoking user."""
    t = h.targets[name]
    log = open(f"{h.tmp}/{name}.log", "a")
    t.proc = subprocess.Popen([t.binary, "--config", f"{h.tmp}/{name}.toml", "--log-level", "warn"],
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    t.pid = t.proc.pid


def haproxy_config(h):
    """HAProxy in TCP mode on its own socket and port, to PostgreSQL's socket
    (else its TCP port, for a --pg without one): one thread, as the poolers
    run, and no logging, as theirs is off."""
    t, d = h.targets["haproxy"], h.direct
    server = f"{d.sock}/.s.PGSQL.{d.port}" if d.sock else f"{d.host}:{d.port}"
    # Two descriptors a connection: sized for the largest persistent cell,
    # not for max_client_conn (the idle clients'), past the open-files limit.
    clients = max([persistent_clients(w)[1] for w in h.s.workloads if persistent_clients(w)] or [0])
    return ("global\n    nbthread 1\n"
            f"    maxconn {clients + 64}\n"
            "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 1h\n"
            "    timeout server 1h\n"
            f"frontend pg\n    bind {t.sock}/.s.PGSQL.{t.port} mode 777\n"
            f"    bind 127.0.0.1:{t.port}\n    default_backend postgres\n"
            f"backend postgres\n    server pg {server}\n")


def start_haproxy(h, binary):
    """Starts HAProxy in the foreground (its pid is our child's) as the
    invoking user, and waits until it relays a query over both transports."""
    t = h.targets["haproxy"]
    os.makedirs(t.sock, exist_ok=True)
    path = f"{h.tmp}/haproxy.cfg"
    with open(path, "w") as f:
        f.write(haproxy_config(h))
    log = open(f"{h.tmp}/haproxy.log", "a")
    t.proc = subprocess.Popen([binary, "-f", path], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    t.pid = t.proc.pid
    return wait_ready(t)


def stop(t):
    """Stops a target this run started (PgBouncer 1.18: SIGTERM = immediate shutdown)."""
    if t.pid and t.spec.kind in ("pgharbor", "pgbouncer", "haproxy"):
        system.stop_pid(t.pid, signal.SIGTERM, t.proc)
    t.pid, t.proc = None, None


def bouncer_config(h, cert):
    """PgBouncer's ini. Connection logging off, as PostgreSQL's and pgharbor's
    are here: logging every login would be charged to PgBouncer's CPU per connection."""
    b = h.targets["pgbouncer"]
    # The unix-peer / tcp-tls-cert cells: auth_type = hba, the rules giving
    # peer / cert to their roles and auth_method to the rest.
    auth = (f"auth_type = hba\nauth_hba_file = {b.sock}/pgbouncer-hba.conf\n" if h.s.hba
            else f"auth_type = {h.auth_method}\n")
    ca = f"client_tls_ca_file = {tlsauth.ca_file(h.tmp)}\n" if h.s.cert else ""
    return (f"[databases]\n{h.bench_db} = {backend_conninfo(h)}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n"
            f"listen_port = {b.port}\nunix_socket_dir = {b.sock}\n{auth}"
            f"auth_file = {b.sock}/userlist.txt\npool_mode = {h.s.pool_mode}\n"
            f"default_pool_size = {h.s.pool_size}\nmax_client_conn = {h.s.max_client_conn}\n"
            f"pidfile = {b.sock}/pgbouncer.pid\nlog_connections = 0\nlog_disconnections = 0\n"
            f"client_tls_sslmode = prefer\nclient_tls_cert_file = {h.ssl}/{cert}.crt\n"
            f"client_tls_key_file = {h.ssl}/{cert}.key\n{ca}server_tls_sslmode = disable\n")


def write_bouncer_config(h, cert):
    path = f"{h.targets['pgbouncer'].sock}/pgbouncer.ini"
    with open(path + ".new", "w") as f:
        f.write(bouncer_config(h, cert))
    system.give_to_db(path + ".new")
    os.replace(path + ".new", path)


def start_bouncer(h):
    """Starts PgBouncer as the database user (in the foreground, so its pid is
    our child's) and waits until it answers."""
    b = h.targets["pgbouncer"]
    pidfile = f"{b.sock}/pgbouncer.pid"
    if os.path.exists(pidfile):
        os.remove(pidfile)
    log = open(f"{h.tmp}/pgbouncer.log", "a")
    b.proc = subprocess.Popen([h.bouncer_bin, f"{b.sock}/pgbouncer.ini"], stdin=subprocess.DEVNULL,
                              stdout=log, stderr=log, **system.as_db())
    log.close()
    b.pid = b.proc.pid
    for _ in range(100):
        if os.path.exists(pidfile) and os.path.getsize(pidfile) or b.proc.poll() is not None:
            break
        time.sleep(0.1)
    return b.proc.poll() is None and wait_ready(b)


def restart(h, name, note):
    """A fresh process of a pooler this run started (same config)."""
    t = h.targets[name]
    stop(t)
    with open(f"{h.tmp}/{name}.log", "a") as f:
        f.write(f"--- pgbench/run: {note} ---\n")
    if t.spec.kind == "pgbouncer":
        return start_bouncer(h)
    start_harbor(h, name)
    return wait_ready(t)


def use_cert(h, kind):
    """Makes PostgreSQL, pgharbor(-base) and PgBouncer serve certificate KIND
    (reload: pg_reload_conf(), SIGHUP, SIGHUP), then checks that each of them
    hands out exactly that certificate. Established sessions are not touched.
    Only with servers this run started (--pg allows one certificate kind)."""
    if kind == h.cur_cert:
        return
    if not h.own_pg:
        die("use_cert: the --pg server's certificate is not ours to switch")
    say(f"switching every target to the {kind} certificate")
    h.psql_su(f"ALTER SYSTEM SET ssl_cert_file = '{h.ssl}/{kind}.crt';\n"
              f"ALTER SYSTEM SET ssl_key_file = '{h.ssl}/{kind}.key';\nSELECT pg_reload_conf();\n")
    for name in ("pgharbor", "pgharbor-base"):
        t = h.targets.get(name)
        if t and t.pid:
            err = write_harbor_config(h, name, kind)
            if err:
                die(f"{name} check rejected the {kind} configuration: {err}")
            os.kill(t.pid, signal.SIGHUP)
    if "pgbouncer" in h.live():
        write_bouncer_config(h, kind)
        os.kill(h.targets["pgbouncer"].pid, signal.SIGHUP)
    want = system.cert_fingerprint(f"{h.ssl}/{kind}.crt")
    for name in ("direct", "pgharbor", "pgharbor-base", "pgbouncer"):
        t = h.direct if name == "direct" else h.targets.get(name)
        if not t or t.failed or (name != "direct" and not t.pid):
            continue
        for i in range(51):
            got = system.served_fingerprint(t.host, t.port)
            if got == want:
                break
            if i >= 50:
                die(f"{name} still serves another certificate ({got}, want {want}) 10 s after reloading")
            time.sleep(0.2)
    h.cur_cert = kind
    time.sleep(0.5)


def tls_info(h, t):
    """What libpq reports about its TLS connection to T (psql's \\conninfo)."""
    p = system.run(["psql", "-X", "-At", t.conninfo("tcp-tls"), "-c", "\\conninfo"], env=t.env())
    served = system.served_fingerprint(t.host, t.port)[:23]
    return f"{h.cur_cert} certificate, {t.name}: {ssl_info(p.stdout + p.stderr)}; served cert SHA-256 {served}…"


def start_failure(t, log_path):
    """Why a pgharbor did not start: its first error line, else its last line."""
    try:
        with open(log_path) as f:
            text = f.read()
    except OSError:
        text = ""
    if not text.strip():
        return "no answer"
    lines = [line for line in text.splitlines() if line]
    hit = next((line for line in lines if any(w in line.lower() for w in ("error", "refus", "panic"))), None)
    return hit or first_match(text, r"$^")
