"""The unix-peer cell (issue 16 item 2): logins over the Unix socket with peer
authentication, so the login costs no password, no hash and no TLS.

Peer authentication compares the client process's OS user (SO_PEERCRED)
with the database role, so pgbench runs as a dedicated unprivileged OS user
(PEER_USER, created when missing) through runuser, as the role of the same
name, a member of `bench` (it reads and writes pgbench's tables). The
poolers keep logging in to PostgreSQL as `bench` (user= in their database
entry), so this cell's clients share the pool of every other cell; only the
client's login differs. Every other login keeps the method it had: the
pg_hba-format files below give everyone else what [auth] method / auth_type
gave them.
"""

import pwd
import secrets

from . import system
from .cli import PEER_USER, SCRAM_ITERATIONS
from .util import die, say, scram_secret, warn

TRANSPORT = "unix-peer"
PEER_LINE = f"local all {PEER_USER} peer\n"


def postgres_hba(peer, first=""):
    """The throwaway cluster's pg_hba.conf: the superuser's own socket logins
    (setting things up) trusted, PEER_USER by peer when the cell runs, FIRST
    (tlsauth's cert line) ahead of the rest, SCRAM for every other login."""
    return ("local all postgres trust\n" + (PEER_LINE if peer else "") + first
            + "local all all scram-sha-256\nhost all all 127.0.0.1/32 scram-sha-256\n")


def pooler_hba(method, peer=True, first=""):
    """pgharbor's hba_file and PgBouncer's auth_hba_file: PEER_USER by peer
    over the socket (when the cell runs), FIRST (tlsauth's cert line), everyone
    else by METHOD (what [auth] method and auth_type say without the cells)
    over the socket and TCP, TLS or not."""
    cells = [f"the {TRANSPORT} cell's clients by peer"] if peer else []
    cells += ["the tcp-tls-cert cell's clients by client certificate"] if first else []
    return (f"# pgbench/run: {'; '.join(cells)}; every other login by {method}\n"
            + (PEER_LINE if peer else "") + first
            + f"local all all {method}\nhost all all 127.0.0.1/32 {method}\n")


def describe(method):
    """The summary's sentence on the cell's logins."""
    return (f"cell Unix socket + peer: pgbench runs as OS user {PEER_USER} (runuser), as role {PEER_USER} "
            f"(member of bench), peer authentication, no password: direct by pg_hba.conf's `{PEER_LINE.strip()}`, "
            f"pgharbor by its hba_file, PgBouncer by auth_type = hba (same line; everyone else {method}); both "
            "poolers log in to PostgreSQL as bench (user= in their database entry), so every cell shares one pool")


def bouncer_userlist_line():
    """PgBouncer looks a login's user up in auth_file before its hba rule
    (peer included) is read, so PEER_USER needs a line there. Its secret is
    that of a random password nobody is given: a password login as PEER_USER
    (over TCP, say) can never succeed."""
    return f'"{PEER_USER}" "{scram_secret(secrets.token_hex(16), SCRAM_ITERATIONS)}"\n'


def as_peer(cmd):
    """CMD run as PEER_USER: what the peer check sees is the process's OS user."""
    return ["runuser", "-u", PEER_USER, "--", *cmd]


def role_sql():
    """PEER_USER's role: a login without password, with bench's privileges
    on the pgbench tables (bench owns them; members inherit that)."""
    return f"CREATE ROLE {PEER_USER} LOGIN;\nGRANT bench TO {PEER_USER};\n"


def os_user_exists():
    try:
        pwd.getpwnam(PEER_USER)
        return True
    except KeyError:
        return False


def ensure_os_user():
    """PEER_USER as a system user without a home or a shell (runuser -u needs neither)."""
    if os_user_exists():
        return
    say(f"creating OS user {PEER_USER} (useradd --system): pgbench runs as it in the {TRANSPORT} cell")
    p = system.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                    "/usr/sbin/nologin", "--user-group", PEER_USER])
    if p.returncode != 0 or not os_user_exists():
        die(f"useradd {PEER_USER} failed: {(p.stdout + p.stderr).strip()}")


def check_possible(s):
    """Before anything starts: running pgbench as another OS user needs root.
    Asked for, the cell without root is an error; in the default list, it is dropped."""
    if not s.peer or system.IS_ROOT:
        return
    if s.peer_asked:
        die(f"--transports {TRANSPORT}: pgbench runs as OS user {PEER_USER} through runuser, which needs root")
    warn(f"not root: no {TRANSPORT} cell (pgbench would run as OS user {PEER_USER} through runuser)")
    s.plain_transports.remove(TRANSPORT)
