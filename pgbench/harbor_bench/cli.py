"""Options, profiles and the settings they resolve to.

Every check here runs before anything is installed or started, and the
messages are those of the bash harness (its tests and users know them).
argparse reads the command line; values are validated by hand so that, as
before, `--idle-clients -1` is "not a number" rather than a missing value.
"""

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from typing import List, Optional

from .helptext import HELP
from .model import persistent_clients
from .parse import Endpoint, split_conninfo
from .util import die

FIXED_WORKLOADS = ("connect", "connect8", "establish", "bulk", "bulkselect")
ALL_TRANSPORTS = ("unix", "unix-peer", "tcp", "tcp-tls", "tcp-tls-nocb", "tcp-tls-cert")
# tcp-tls-nocb / tcp-tls-cert (tlsauth.py): TLS logins without channel binding
# and by client certificate; after the tcp-tls cells, never in the defaults.
TLS_AUTH_CELLS = ("tcp-tls-nocb", "tcp-tls-cert")
# tcp-tls-cert: the role (and client certificate CN) of its logins.
CERT_USER = "bench_cert"
# unix-peer: pgbench runs as this OS user, logging in as the role of the same
# name with peer authentication (no password, no hash, no TLS on the socket).
PEER_USER = "bench_peer"
DEFAULT_WORKLOADS = "connect,connect8,establish,persistent,persistent64,tpcb,bulk,bulkselect"
PERSISTENT_RE = re.compile(r"(persistent|tpcb)([1-9][0-9]*)?")
SCRAM_ITERATIONS = 16  # every target pays the same (cheap) SCRAM key derivation
POSITIVE = ("rounds", "time", "scale", "pg_port", "pgharbor_port", "pgbouncer_port", "bulk_copies",
            "bulk_selects", "pool_size", "pooler_pid", "baseline_port")
COUNTS = ("warmup", "idle_clients")
DECIMALS = ("load_limit", "other_limit")
VALUE_OPTIONS = tuple("--" + k.replace("_", "-") for k in POSITIVE + COUNTS + DECIMALS) + (
    "--profile", "--out", "--cert", "--workloads", "--clients", "--transports", "--pool-mode", "--skip",
    "--pg", "--pooler", "--pgharbor-bin", "--baseline-bin")
# Profiles, sized for a 2-CPU machine; what was given explicitly stays.
PROFILES = {
    "default": dict(rounds=3, time=4, cert="ecdsa", bulk_copies=4, bulk_selects=3, warmup=2),
    "quick": dict(rounds=1, time=2, cert="ecdsa", bulk_copies=2, bulk_selects=2, warmup=1),
    "txpool": dict(rounds=3, time=30, cert="ecdsa", bulk_copies=4, bulk_selects=3, warmup=2,
                   workloads="persistent64,tpcb64", transports="unix,tcp", pool_mode="transaction",
                   idle_clients=10000),
}
LAST_DEFAULTS = dict(workloads=DEFAULT_WORKLOADS, transports="unix,unix-peer,tcp,tcp-tls",
                     pool_mode="session", idle_clients=0)


@dataclass
class Settings:
    """What one run does, resolved from the options and the profile."""
    profile: str = "default"
    rounds: int = 3
    time: int = 4
    warmup: int = 2
    scale: int = 10
    workloads: List[str] = field(default_factory=list)
    plain_transports: List[str] = field(default_factory=list)
    with_tls: bool = False
    auth_cells: List[str] = field(default_factory=list)  # of TLS_AUTH_CELLS, after the tcp-tls ones
    certs: List[str] = field(default_factory=list)
    pool_mode: str = "session"
    pool_size: int = 70
    max_clients: int = 4
    max_client_conn: int = 2000
    fd_limit: int = 4096
    max_connections: int = 300
    idle_clients: int = 0
    bulk_copies: int = 4
    bulk_selects: int = 3
    skip: set = field(default_factory=set)  # direct, pgharbor, pgbouncer, notls, haproxy
    pg: Optional[Endpoint] = None
    pg_conninfo: str = ""
    pg_init: bool = False
    pooler: Optional[Endpoint] = None
    peer_asked: bool = False  # unix-peer named in --transports (not only the default list)
    pooler_conninfo: str = ""
    pooler_pid: Optional[int] = None
    harbor_bin: str = ""     # --pgharbor-bin, absolute
    base_bin: str = ""       # --baseline-bin, absolute
    build: bool = True
    install: bool = True
    plot: bool = True
    keep: bool = False
    ports: dict = field(default_factory=dict)  # pg, pgharbor, pgbouncer, pgharbor-base: given ones
    load_limit: str = "1.5"
    other_limit: str = "0.25"
    out: str = ""
    print_config: bool = False

    @property
    def transports(self):
        """The cells' transports: the plain ones, then TLS once per certificate."""
        return (self.plain_transports + ([f"tcp-tls-{c}" for c in self.certs] if self.with_tls else [])
                + self.auth_cells)

    @property
    def cert(self):
        """Whether the tcp-tls-cert cell runs (so the targets get its CA, role and hba line)."""
        return "tcp-tls-cert" in self.auth_cells

    @property
    def hba(self):
        """Whether the targets' logins come from pg_hba-format rules (a special cell runs)."""
        return self.peer or self.cert

    @property
    def peer(self):
        """Whether the unix-peer cell runs (so the targets get its role, OS user and hba lines)."""
        return "unix-peer" in self.plain_transports

    @property
    def with_base(self):
        return bool(self.base_bin)

    @property
    def haproxy(self):
        """Whether the HAProxy relay runs: a persistent workload over the socket or TCP plain."""
        return ("haproxy" not in self.skip and any(persistent_clients(w) for w in self.workloads)
                and bool({"unix", "tcp"} & set(self.plain_transports)))


class Parser(argparse.ArgumentParser):
    def error(self, message):
        die(f"{message} (see --help)")


def parser():
    p = Parser(prog="pgbench/run", add_help=False, allow_abbrev=False)
    for opt in VALUE_OPTIONS:
        p.add_argument(opt, action="append" if opt == "--skip" else "store")
    for flag in ("--quick", "--init", "--no-plot", "--skip-notls", "--skip-pgbouncer", "--no-build",
                 "--no-install", "--keep", "--print-config"):
        p.add_argument(flag, action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    return p


def join_values(argv):
    """`--opt value` as `--opt=value`, so a value that starts with '-' stays a
    value; a value option with nothing after it, or an empty value, is an error."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in VALUE_OPTIONS:
            if i + 1 >= len(argv) or argv[i + 1] == "":
                die(f"{a} needs a value (see --help)")
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        if a.startswith("--") and "=" in a and a.split("=", 1)[0] not in VALUE_OPTIONS:
            die(f"unknown option: {a} (see --help)")
        out.append(a)
        i += 1
    return out


def checked_numbers(a):
    """The numeric options as numbers (None when not given), checked as before."""
    for k in POSITIVE + COUNTS + DECIMALS:
        v, opt = getattr(a, k), "--" + k.replace("_", "-")
        if v is None:
            continue
        if k in POSITIVE and not (re.fullmatch(r"[0-9]+", v) and int(v) > 0):
            die(f"{opt}: not a positive integer: {v}")
        if k in COUNTS and not re.fullmatch(r"[0-9]+", v):
            die(f"{opt}: not a number: {v}")
        if k in DECIMALS and not re.fullmatch(r"[0-9]+([.][0-9]+)?", v):
            die(f"{opt}: not a number: {v}")
        if k not in DECIMALS:
            setattr(a, k, int(v))


def choice(a, name, allowed, words):
    v = getattr(a, name)
    if v is not None and v not in allowed:
        die(f"--{name.replace('_', '-')}: {words}, not: {v}")


def skip_targets(lists):
    out = set()
    for text in lists or []:
        items = text.split(",") if text else []
        if not items:
            die("--skip: nothing given")
        for x in items:
            names = {"direct": "direct", "pgharbor": "pgharbor", "pgbouncer": "pgbouncer",
                     "notls": "notls", "pgharbor-notls": "notls", "haproxy": "haproxy"}
            if x not in names:
                die(f"--skip: unknown target '{x}' (choose from: direct pgharbor pgbouncer notls haproxy)")
            out.add(names[x])
    return out


def pick_list(name, text, allowed):
    """The comma-separated TEXT, checked and put in the order of ALLOWED."""
    items = text.split(",")
    for x in items:
        if x not in allowed:
            die(f"{name}: unknown value '{x}' (choose from: {' '.join(allowed)})")
    picked = [x for x in allowed if x in items]
    if not picked:
        die(f"{name}: nothing selected")
    return picked


def persistent_id(family, clients):
    return family if clients == 16 else f"{family}{clients}"


def select_workloads(text, clients_text):
    """--workloads and --clients as workload ids in display order: the login
    workloads, the persistent ones by family and client count, then bulk."""
    items = text.split(",")
    persist, families = [], []
    for x in items:
        m = PERSISTENT_RE.fullmatch(x)
        if m:
            persist.append(x)
            if m.group(1) not in families:
                families.append(m.group(1))
        elif x not in FIXED_WORKLOADS:
            die(f"--workloads: unknown value '{x}' (choose from: {' '.join(FIXED_WORKLOADS)} "
                "persistent persistentN tpcb tpcbN)")
    if clients_text is not None:
        clients = clients_text.split(",")
        for c in clients:
            if not re.fullmatch(r"[1-9][0-9]*", c):
                die(f"--clients: not a positive integer: '{c}'")
        if not families:
            die("--clients: no persistent workload selected (persistent, tpcb)")
        persist = [persistent_id(f, int(c)) for f in families for c in clients]
    out = [w for w in ("connect", "connect8", "establish") if w in items]
    for f in ("persistent", "tpcb"):
        mine = {}
        for x in persist:
            m = PERSISTENT_RE.fullmatch(x)
            if m.group(1) == f:
                mine.setdefault(int(m.group(2) or 16), x)
        out += [mine[c] for c in sorted(mine) if mine[c] not in out]
    out += [w for w in ("bulk", "bulkselect") if w in items]
    if not out:
        die("--workloads: nothing selected")
    return out


def workload_clients(w):
    """Clients a workload opens at once (connect8: 8; persistentN, tpcbN: N)."""
    m = PERSISTENT_RE.fullmatch(w)
    if m:
        return int(m.group(2) or 16)
    return 8 if w == "connect8" else 0


def executable(path, opt, need_file=False):
    if not (os.access(path, os.X_OK) and (os.path.isfile(path) or not need_file)):
        die(f"{opt}: not an executable file: {path}")
    return os.path.join(os.path.abspath(os.path.dirname(path)), os.path.basename(path))


def endpoint(text, opt):
    try:
        return split_conninfo(text)
    except ValueError as e:
        die(f"{opt}: cannot parse the connection string: {e}")


def size_limits(s):
    """Pool size, client and file limits, max_connections: sized for the workloads."""
    s.max_clients = max([4] + [workload_clients(w) for w in s.workloads])
    if s.pool_size is None:
        # Session pooling: every client holds a backend, so the pool must fit them all.
        s.pool_size = max(70, s.max_clients + 6) if s.pool_mode == "session" else 20
    s.max_client_conn = max(2000, s.idle_clients + 200)
    s.fd_limit = max(4096, s.max_client_conn + 2 * s.pool_size + 256)
    npools = 4 if s.base_bin else 3
    s.max_connections = max(300, s.max_clients + npools * s.pool_size + 20)


def servers(s, a):
    """--pg, --pooler, --pgharbor-bin, --baseline-bin: parsed now, so a bad one fails first."""
    if a.pg is not None:
        s.pg, s.pg_conninfo = endpoint(a.pg, "--pg"), a.pg
        if s.certs == ["ecdsa", "rsa"]:
            die("--pg: one certificate kind only (the server keeps its own certificate)")
    elif a.init:
        die("--init goes with --pg (a throwaway PostgreSQL is always initialised)")
    if a.pooler is not None:
        if a.pg is None:
            die("--pooler needs --pg: the PostgreSQL behind the pooler, for the direct cells and the pgbench tables")
        s.pooler, s.pooler_conninfo = endpoint(a.pooler, "--pooler"), a.pooler
        s.skip.add("pgharbor")  # the pooler under test takes pgharbor's place
    elif a.pooler_pid is not None:
        die("--pooler-pid goes with --pooler")
    if "pgharbor" in s.skip:
        s.skip.add("notls")
    if a.pgharbor_bin is not None:
        s.harbor_bin, s.build = executable(a.pgharbor_bin, "--pgharbor-bin"), False
    if a.baseline_bin is not None:
        if s.pooler:
            die("--baseline-bin goes with pgharbor, not with --pooler")
        if "pgharbor" in s.skip:
            die("--baseline-bin is compared with pgharbor: not with --skip pgharbor")
        s.base_bin = executable(a.baseline_bin, "--baseline-bin", need_file=True)
    elif a.baseline_port is not None:
        die("--baseline-port goes with --baseline-bin")
    if {"direct", "pgharbor", "pgbouncer"} <= s.skip and not s.pooler:
        die("--skip: every target skipped, nothing to run")


def peer_cell(s):
    """unix-peer needs the throwaway PostgreSQL: its pg_hba.conf gets the peer
    line and its role, which a --pg server's owner has not given us. Asked
    for, that is an error; in the default list, the cell is dropped."""
    if not s.peer or not s.pg:
        return
    if s.peer_asked:
        die("--transports unix-peer needs the throwaway PostgreSQL (its pg_hba.conf gets a peer line "
            f"for role {PEER_USER}): not with --pg")
    s.plain_transports.remove("unix-peer")


def resolve(argv):
    """The Settings the command line asks for (prints --help and exits on -h)."""
    a, extra = parser().parse_known_args(join_values(argv))
    if extra:
        die(f"unknown option: {extra[0]} (see --help)")
    if a.help:
        sys.stdout.write(HELP)
        sys.exit(0)
    checked_numbers(a)
    choice(a, "profile", PROFILES, "default, quick or txpool")
    choice(a, "cert", ("ecdsa", "rsa", "both"), "ecdsa, rsa or both")
    choice(a, "pool_mode", ("session", "transaction", "statement"), "session, transaction or statement")
    skip = skip_targets(a.skip)
    profile = "quick" if a.quick and a.profile is None else a.profile or "default"
    peer_asked = a.transports is not None and "unix-peer" in a.transports.split(",")
    for defaults in (PROFILES[profile], LAST_DEFAULTS):
        for k, v in defaults.items():
            if getattr(a, k) is None:
                setattr(a, k, v)
    skip |= {"pgbouncer"} if a.skip_pgbouncer else set()
    skip |= {"notls"} if a.skip_notls or profile in ("quick", "txpool") else set()
    s = Settings(profile=profile, rounds=a.rounds, time=a.time, warmup=a.warmup, scale=a.scale or 10,
                 pool_mode=a.pool_mode, pool_size=a.pool_size, idle_clients=a.idle_clients,
                 bulk_copies=a.bulk_copies, bulk_selects=a.bulk_selects, skip=skip, pg_init=a.init,
                 pooler_pid=a.pooler_pid, build=not a.no_build, install=not a.no_install,
                 plot=not a.no_plot, keep=a.keep, load_limit=a.load_limit or "1.5",
                 other_limit=a.other_limit or "0.25", out=a.out or "", print_config=a.print_config,
                 certs=["ecdsa", "rsa"] if a.cert == "both" else [a.cert],
                 ports={"pg": a.pg_port, "pgharbor": a.pgharbor_port, "pgbouncer": a.pgbouncer_port,
                        "pgharbor-base": a.baseline_port})
    s.workloads = select_workloads(a.workloads, a.clients)
    picked = pick_list("--transports", a.transports, ALL_TRANSPORTS)
    s.plain_transports = [t for t in picked if t != "tcp-tls" and t not in TLS_AUTH_CELLS]
    s.auth_cells = [t for t in picked if t in TLS_AUTH_CELLS]
    s.with_tls = "tcp-tls" in picked
    s.peer_asked = peer_asked
    servers(s, a)
    peer_cell(s)
    size_limits(s)
    return s


def config_lines(s):
    """--print-config: the resolved settings, one key=value a line."""
    skipped = [g for g in ("direct", "pgharbor", "pgbouncer", "notls", "haproxy") if g in s.skip]

    def existing(e):
        return f"existing host={e.host} port={e.port} user={e.user} dbname={e.dbname}"
    if "pgharbor" in s.skip:
        harbor = "none (pgharbor not run)"
    elif s.harbor_bin:
        harbor = s.harbor_bin
    else:
        harbor = "target/release/pgharbor " + ("(cargo build --release)" if s.build else "(--no-build)")
    ports = [s.ports[k] or "auto" for k in ("pg", "pgharbor", "pgbouncer")]
    if s.with_base:
        ports.append(s.ports["pgharbor-base"] or "auto")
    values = dict(
        profile=s.profile, rounds=s.rounds, time=s.time, warmup=s.warmup, scale=s.scale,
        workloads=",".join(s.workloads), transports=",".join(s.transports), certs=",".join(s.certs),
        pool_mode=s.pool_mode, pool_size=s.pool_size, max_client_conn=s.max_client_conn,
        fd_limit=s.fd_limit, idle_clients=s.idle_clients, bulk_copies=s.bulk_copies,
        bulk_selects=s.bulk_selects, skip=",".join(skipped),
        pg=existing(s.pg) if s.pg else "throwaway", pg_init=int(s.pg_init),
        pooler=existing(s.pooler) if s.pooler else "none", pooler_pid=s.pooler_pid or "",
        baseline_bin=s.base_bin or "none", pgharbor_bin=harbor, install=int(s.install), plot=int(s.plot),
        keep=int(s.keep), load_limit=s.load_limit, other_limit=s.other_limit,
        ports=",".join(str(p) for p in ports), out=s.out or "results/<date>_<time>")
    return [f"{k}={v}" for k, v in values.items()]
