"""The PostgreSQL under the benchmark: a throwaway cluster (initdb as the
`postgres` OS user, SSL on, SCRAM for every client login, a role whose
secret has 16 iterations), or one that already runs (--pg), of which the
harness learns what it needs and changes nothing.

Both end with the same facts on the harness: the direct target, the
poolers' auth method and secret, how the poolers reach PostgreSQL, and the
sentence the summary prints about authentication.
"""

import os
import re
import secrets

from . import peer, procfs, system, tlsauth
from .cli import SCRAM_ITERATIONS
from .parse import listener_pid, probe_vars, quote_value
from .util import die, say, scram_secret, warn

PG_TABLES = "('pgbench_accounts', 'pgbench_branches', 'pgbench_tellers', 'pgbench_history')"


def start_own(h):
    """initdb, start, and the bench role and database on a throwaway cluster."""
    s, data, pgdir = h.s, h.data, h.pgdir
    say(f"initdb ({h.pg_bin}) into {data}")
    p = system.run([f"{h.pg_bin}/initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                    "--no-locale", "--no-sync"], db=True)
    if p.returncode != 0:
        die(f"initdb failed: {p.stdout}{p.stderr}")
    with open(f"{data}/postgresql.conf", "a") as f:
        f.write(f"\n# --- pgbench/run ---\nlisten_addresses = '127.0.0.1'\nport = {h.pg_port}\n"
                f"unix_socket_directories = '{h.pg_sock}'\nmax_connections = {s.max_connections}\n"
                f"fsync = off\nssl = on\nssl_cert_file = '{h.ssl}/{h.cur_cert}.crt'\n"
                f"ssl_key_file = '{h.ssl}/{h.cur_cert}.key'\n"
                # tcp-tls-cert: the CA of its client certificate (TLS clients are then asked for one).
                + (f"ssl_ca_file = '{tlsauth.ca_file(h.tmp)}'\n" if s.cert else ""))
    # Every target pays the same client authentication: SCRAM, except the
    # superuser's own socket logins used to set things up, and peer for the
    # unix-peer cell's role.
    with open(f"{data}/pg_hba.conf", "w") as f:
        f.write(peer.postgres_hba(s.peer, tlsauth.CERT_LINE if s.cert else ""))
    say(f"starting PostgreSQL on 127.0.0.1:{h.pg_port} and {h.pg_sock}")
    p = system.run([f"{h.pg_bin}/pg_ctl", "-D", data, "-l", f"{pgdir}/postgres.log", "-w", "-t", "60", "-s",
                    "start"], db=True)
    if p.returncode != 0:
        die(f"PostgreSQL did not start: {tail(f'{pgdir}/postgres.log', 20)}")
    with open(f"{data}/postmaster.pid") as f:
        h.pg_pid = int(f.readline())
    password = secrets.token_hex(12)
    h.psql_su(f"CREATE ROLE bench LOGIN;\nALTER ROLE bench PASSWORD '{scram_secret(password, SCRAM_ITERATIONS)}';\n"
              "CREATE DATABASE bench OWNER bench;\n" + (peer.role_sql() if s.peer else "")
              + (tlsauth.role_sql() if s.cert else ""))
    # The poolers' auth files get the secret as PostgreSQL stores it.
    h.secret = h.psql_su("SELECT rolpassword FROM pg_authid WHERE rolname = 'bench'", at=True)
    if not h.secret.startswith(f"SCRAM-SHA-256${SCRAM_ITERATIONS}:"):
        die(f"unexpected secret for bench in pg_authid: {h.secret}")
    h.pg_version = h.psql_su("SHOW server_version", at=True)
    h.bench_user = h.bench_db = "bench"
    d = h.direct
    d.sock, d.host, d.port, d.user, d.db, d.pw = h.pg_sock, "127.0.0.1", str(h.pg_port), "bench", "bench", password
    d.serves = ["unix"] + ([peer.TRANSPORT] if s.peer else []) + ["tcp", "tcp-tls"]
    # The poolers reach PostgreSQL over its socket.
    h.backend_kv = f"host={h.pg_sock} port={h.pg_port} dbname=bench"
    h.auth_method = "scram-sha-256"
    h.auth_desc = (f"every target: SCRAM-SHA-256 client login of role bench, secret with {SCRAM_ITERATIONS} "
                   "iterations (pg_authid's secret copied into both poolers' auth files); poolers reach "
                   "PostgreSQL over its Unix socket, without TLS")
    if s.peer:
        h.auth_desc += "; " + peer.describe(h.auth_method)
    if s.cert:
        h.auth_desc += "; " + tlsauth.describe()
    if tlsauth.NOCB in s.auth_cells:
        h.auth_desc += "; " + tlsauth.NOCB_DESC


def tail(path, n):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def probe_server(h, t, conninfo):
    """Connects once with CONNINFO as given and fills T's host or socket, port,
    user and database from what libpq used (psql's HOST, PORT, USER, DBNAME)."""
    p = system.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", conninfo],
                   stdin="\\echo :HOST\n\\echo :PORT\n\\echo :USER\n\\echo :DBNAME\n",
                   env=t.env(PGCONNECT_TIMEOUT="10"))
    if p.returncode != 0:
        die(f"cannot connect to {t.name} ({conninfo} minus its password): {p.stderr.strip()}")
    v = probe_vars(p.stdout)
    if v["host"].startswith("/"):
        t.sock = v["host"]
    else:
        t.host = v["host"]
    t.port, t.user, t.db = v["port"], v["user"], v["dbname"]


def probe_transports(h, t):
    """T.serves = the transports that answer; a note for each that does not."""
    from .targets import psql_ok
    t.serves = []
    for tr in ("unix", "tcp", "tcp-tls"):
        if (tr == "unix" and not t.sock) or (tr != "unix" and not t.host):
            continue
        ok, err = psql_ok(t, tr)
        if ok:
            t.serves.append(tr)
        else:
            h.pg_notes.append(f"{t.name} does not answer over {tr}: {err.splitlines()[0] if err else ''}")


def find_listener(sock_file=None, port=None):
    """The process listening on a Unix socket file or local TCP port, if `ss` shows it."""
    import shutil
    if not shutil.which("ss"):
        return None
    if sock_file:
        return listener_pid(system.run(["ss", "-xlpH"]).stdout, sock_file)
    return listener_pid(system.run(["ss", "-ltnpH", f"sport = :{port}"]).stdout)


def direct_query(h, sql):
    """One query on --pg's server as given; its unaligned output, or None on error."""
    p = system.run(["psql", "-X", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1", h.s.pg_conninfo, "-c", sql],
                   env=h.direct.env())
    return p.stdout.strip() if p.returncode == 0 else None


def existing_pid(h, super_):
    """--pg's postmaster, for PostgreSQL's CPU time: postmaster.pid, else the listener."""
    d, pid = h.direct, None
    if super_:
        dd = direct_query(h, "SHOW data_directory")
        try:
            with open(f"{dd}/postmaster.pid") as f:
                pid = int(f.readline())
        except (OSError, TypeError, ValueError):
            pid = None
    if not pid and d.sock:
        pid = find_listener(sock_file=f"{d.sock}/.s.PGSQL.{h.pg_port}")
    elif not pid and re.match(r"^(127\.|localhost$|::1$)", d.host):
        pid = find_listener(port=h.pg_port)
    if pid and procfs.comm(pid) not in ("postgres", "postmaster"):
        pid = None
    return pid


def use_existing(h):
    """--pg: learn what we need from the running server; change nothing on it."""
    s, d = h.s, h.direct
    d.pw, d.extra = s.pg.password or h.caller_pgpassword, s.pg.rest
    say("existing PostgreSQL (--pg): connecting")
    probe_server(h, d, s.pg_conninfo)
    h.bench_user, h.bench_db, h.pg_port = d.user, d.db, d.port
    row = direct_query(h, "SELECT r.rolsuper, current_setting('server_version'), current_setting('ssl'), "
                          "current_setting('max_connections'), coalesce((SELECT setting FROM pg_settings "
                          "WHERE name = 'unix_socket_directories'), '') FROM pg_roles r WHERE r.rolname = current_user")
    if row is None:
        die("--pg: cannot read the server's settings")
    super_, h.pg_version, ssl_on, maxconn, dirs = (row.split("\t") + [""] * 5)[:5]
    super_ = super_ == "t"
    # Its Unix socket, if it has one here (unix_socket_directories is hidden
    # from roles without pg_read_all_settings); TCP on 127.0.0.1 if it was given a socket.
    if not d.sock:
        d.sock = next((x.strip() for x in dirs.split(",") if x.strip().startswith("/")
                       and os.path.exists(f"{x.strip()}/.s.PGSQL.{h.pg_port}")), "")
    d.host = d.host or "127.0.0.1"
    probe_transports(h, d)
    if not d.serves:
        die("--pg: the server answers over none of unix, tcp, tcp-tls")
    if ssl_on != "on":
        h.pg_notes.append("the server has ssl = off: no direct TLS cells")
    npools = 2 + s.with_base
    if int(maxconn or 0) < s.max_clients + npools * s.pool_size + 5:
        warn(f"--pg: max_connections = {maxconn}; {s.max_clients} direct clients plus {npools} pools "
             f"of {s.pool_size} may not fit")
    h.pg_pid = existing_pid(h, super_)
    if not h.pg_pid:
        h.pg_notes.append("PostgreSQL's process was not found here: its CPU time is not recorded, other "
                          "processes' CPU includes it, and no run is flagged for it")
    existing_auth(h, super_)


def existing_auth(h, super_):
    """The poolers' auth file: the stored secret (superuser), else the password;
    and how the poolers reach the server."""
    d = h.direct
    secret = (direct_query(h, "SELECT coalesce(rolpassword, '') FROM pg_authid WHERE rolname = current_user")
              or "") if super_ else ""
    user = h.bench_user
    if secret.startswith("SCRAM-SHA-256$"):
        h.secret, h.auth_method = secret, "scram-sha-256"
        n = secret[len("SCRAM-SHA-256$"):].split(":")[0]
        h.auth_desc = (f"every target: SCRAM-SHA-256 login of role {user} with its own secret ({n} iterations, "
                       "copied from pg_authid into both poolers' auth files)")
    elif secret.startswith("md5"):
        h.secret, h.auth_method = secret, "md5"
        h.auth_desc = (f"poolers: md5 login of role {user} (its md5 hash copied from pg_authid); direct: as the "
                       "server's pg_hba.conf says")
    elif d.pw:
        h.secret, h.auth_method = d.pw, "scram-sha-256"
        h.auth_desc = (f"poolers: SCRAM-SHA-256 login of role {user} from the plain-text password (the poolers' "
                       "own secret, 4096 iterations, may cost more or less than the server's); direct: as the "
                       "server's pg_hba.conf says")
    elif super_:
        h.secret, h.auth_method = "", "trust"
        h.auth_desc = (f"role {user} has no password: the poolers trust their clients; direct: as the server's "
                       "pg_hba.conf says")
    else:
        die(f"--pg: the poolers need role {user}'s password (password= or PGPASSWORD) or a superuser role")
    if d.sock:
        h.backend_kv = f"host={quote_value(d.sock)} port={h.pg_port} dbname={quote_value(h.bench_db)}"
        h.auth_desc += "; poolers reach PostgreSQL over its Unix socket"
    else:
        h.backend_kv = (f"host={quote_value(d.host)} port={h.pg_port} dbname={quote_value(h.bench_db)} "
                        "sslmode=disable")
        h.auth_desc += f"; poolers reach PostgreSQL over TCP ({d.host}), without TLS"


def setup_psql(h, sql):
    d = h.direct
    p = system.run(["psql", "-X", "-Atq", "-v", "ON_ERROR_STOP=1", h.setup_conn, "-c", sql], env=d.env())
    if p.returncode != 0:
        die(f"psql: {p.stderr.strip()}")
    return p.stdout.strip()


def pgbench_init(h):
    say(f"pgbench -i -s {h.s.scale}")
    p = system.run(["pgbench", "-i", "-q", "-s", str(h.s.scale), h.setup_conn], env=h.direct.env())
    with open(f"{h.tmp}/pgbench-init.log", "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        die(f"pgbench -i failed: {p.stdout}{p.stderr}")


def init_tables(h):
    """The pgbench tables: always on a throwaway cluster; on --pg only in an
    empty database or with --init (never drop the user's tables unasked)."""
    s = h.s
    if h.own_pg:
        return pgbench_init(h)
    n = int(setup_psql(h, f"SELECT count(*) FROM pg_class WHERE relname IN {PG_TABLES} "
                          "AND relkind IN ('r', 'p') AND pg_table_is_visible(oid)"))
    if s.pg_init:
        pgbench_init(h)
    elif n == 0:
        say(f"--pg: no pgbench tables in database {h.bench_db}: initialising them")
        pgbench_init(h)
    elif n < 4:
        die(f"--pg: database {h.bench_db} has {n} of the 4 pgbench_* tables; give --init to recreate them "
            "(pgbench -i drops them)")
    s.scale = int(setup_psql(h, "SELECT count(*) FROM pgbench_branches"))
    say(f"--pg: pgbench tables at scale {s.scale}")


def bulk_setup(h):
    """The bulk workload's script (BULK_COPIES x \\copy to /dev/null in one
    psql session) and the byte count of the COPY text, measured once."""
    h.bulk_rows = int(setup_psql(h, "SELECT count(*) FROM pgbench_accounts"))
    with open(h.bulk_sql, "w") as f:
        f.write("".join(f"\\copy ({h.BULK_QUERY}) to '/dev/null'\n" for _ in range(h.s.bulk_copies)))
    h.bulk_bytes = 0
    if any(w.startswith("bulk") for w in h.s.workloads):
        import subprocess
        with subprocess.Popen(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", h.setup_conn, "-c",
                               f"COPY ({h.BULK_QUERY}) TO STDOUT"], stdout=subprocess.PIPE,
                              env=h.direct.env()) as p:
            for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
                h.bulk_bytes += len(chunk)
        if h.bulk_bytes <= 0:
            die("the bulk COPY returned no data")
        say(f"bulk: COPY ({h.BULK_QUERY}) TO STDOUT = {h.bulk_rows} rows, {h.bulk_bytes} bytes; "
            f"{h.s.bulk_copies} per run")
