"""The harness's vocabulary: target, transport and workload names, and the
`Run` record that is at once raw.csv's schema and results.json's "runs".

One definition on purpose: the 27 columns used to be spelled out three times
(header, failed row, measured row) and drifted whenever one was edited.
"""

import dataclasses
import re
from dataclasses import dataclass, fields
from typing import Optional

# Display names and orders; unknown values are shown as they are, after these.
# "pooler" is a pooler pgbench/run did not start (--pooler CONNINFO);
# "pgharbor-base" another pgharbor build with pgharbor's config (--baseline-bin);
# "haproxy" a relay that parses nothing, in the persistent cells: the floor
# of what relaying a client's bytes costs on this machine.
TARGETS = {"direct": "PostgreSQL direct", "pgharbor": "pgharbor", "pgharbor-base": "pgharbor-base",
           "pgbouncer": "PgBouncer", "pgharbor-notls": "pgharbor, no [tls]",
           "pooler": "pooler under test (--pooler)", "haproxy": "HAProxy TCP relay (no pooling)"}
SHORT = {"direct": "PostgreSQL", "pgharbor": "pgharbor", "pgharbor-base": "pgharbor-base",
         "pgbouncer": "PgBouncer", "pgharbor-notls": "pgharbor (no [tls])", "pooler": "pooler",
         "haproxy": "HAProxy"}
BASE = "pgharbor-base"
BASE_BAR = 0.98  # pgharbor / pgharbor-base: a refactor may cost at most noise
TRANSPORTS = {"unix": "Unix socket", "unix-peer": "Unix socket + peer", "tcp": "TCP plain",
              "tcp-tls-ecdsa": "TCP + TLS (ECDSA P-256)", "tcp-tls-rsa": "TCP + TLS (RSA-2048)",
              "tcp-tls-nocb": "TCP + TLS, no channel binding", "tcp-tls-cert": "TCP + TLS + client certificate"}
WORKLOADS = {"connect": "Connect per transaction", "connect8": "Connect per transaction, 8 clients",
             "establish": "Establishment only (connect, authenticate, disconnect)",
             "persistent": "Persistent select-only, 16 clients", "tpcb": "TPC-B-like, 16 clients",
             "bulk": "Bulk COPY out", "bulkselect": "Bulk SELECT"}
# Persistent workloads at any client count: persistent<N> (pgbench -S) and
# tpcb<N> (the default script); plain "persistent" and "tpcb" are N = 16.
PERSISTENT_RE = re.compile(r"(persistent|tpcb)(\d*)")
BULK = ("bulk", "bulkselect")  # measured in MB/s
LOGINS = ("connect", "connect8", "establish")  # a transaction is a login
POOLERS = ("pgharbor", "pgharbor-base", "pgbouncer", "pgharbor-notls", "pooler", "haproxy")  # CPU is measured
MODE_TARGETS = ("pgharbor", "pgharbor-base", "pgbouncer", "pgharbor-notls")  # run in --pool-mode
TLS_PREFIX = "tcp-tls-"
# TLS cells that differ from tcp-tls-<cert> in the login, not the server
# certificate (tlsauth.py): the certificate each is served with.
TLS_AUTH_CERT = {"tcp-tls-nocb": "ecdsa", "tcp-tls-cert": "ecdsa"}


def persistent_clients(w):
    """(family, clients) of a persistent workload id, or None: tpcb64 -> ("tpcb", 64)."""
    m = PERSISTENT_RE.fullmatch(w)
    if not m or m.group(2).startswith("0"):
        return None
    return m.group(1), int(m.group(2) or 16)


def cert_of(transport):
    """The certificate kind of a TLS cell ("tcp-tls-rsa" -> "rsa", "tcp-tls-cert" -> "ecdsa"), else ""."""
    if transport in TLS_AUTH_CERT:
        return TLS_AUTH_CERT[transport]
    return transport[len(TLS_PREFIX):] if transport.startswith(TLS_PREFIX) else ""


def cert_cell(transport):
    """A tcp-tls-<cert> cell: TLS with SCRAM as libpq defaults, per server certificate."""
    return transport.startswith(TLS_PREFIX) and transport not in TLS_AUTH_CERT


def _col(fmt=None, quoted=False):
    """A raw.csv column: FMT formats a number as the CSV has always shown it
    (pgbench's own precision for its figures); QUOTED text is always quoted."""
    return dataclasses.field(default=None, metadata={"fmt": fmt, "quoted": quoted})


@dataclass
class Run:
    """One pgbench (or psql) run of one target in one cell: a raw.csv row.

    Empty (None) where the figure does not apply or was not measured: a
    target that could not start has only the cell, the command and why."""
    round: Optional[int] = _col()
    workload: Optional[str] = _col()
    transport: Optional[str] = _col()
    target: Optional[str] = _col()
    command: Optional[str] = _col(quoted=True)
    started: Optional[str] = _col()
    load1_before: Optional[float] = _col("{:.2f}")
    ncpu: Optional[int] = _col()
    other_cpus: Optional[float] = _col("{:.2f}")
    flags: Optional[str] = _col(quoted=True)
    status: Optional[str] = _col(quoted=True)
    rc: Optional[int] = _col()
    tps: Optional[float] = _col("{:.6f}")
    tx: Optional[int] = _col()
    failed_tx: Optional[int] = _col()
    latency_ms: Optional[float] = _col("{:.3f}")
    conn_ms: Optional[float] = _col("{:.3f}")
    wall_s: Optional[float] = _col("{:.3f}")
    pooler_cpu_s: Optional[float] = _col("{:.2f}")
    pooler_us_per_tx: Optional[float] = _col("{:.1f}")
    pg_cpu_s: Optional[float] = _col("{:.2f}")
    pgbench_cpu_s: Optional[float] = _col("{:.2f}")
    cert: Optional[str] = _col()
    bytes: Optional[int] = _col()
    mb_per_s: Optional[float] = _col("{:.1f}")
    pooler_s_per_gb: Optional[float] = _col("{:.2f}")
    pool_mode: Optional[str] = _col()

    def csv_fields(self):
        """The row as raw.csv text: text fields quoted (double quotes turned
        into single ones and newlines into spaces, so a naive reader splits
        it right), numbers in their column's format, None as empty."""
        out = []
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None:
                text = ""
            elif f.metadata["fmt"] and isinstance(v, (int, float)):
                text = f.metadata["fmt"].format(v)
            else:
                text = str(v)
            if f.metadata["quoted"]:
                text = '"' + text.replace('"', "'").replace("\n", " ") + '"'
            out.append(text)
        return ",".join(out)


RUN_FIELDS = tuple(f.name for f in fields(Run))
CSV_HEADER = ",".join(RUN_FIELDS)
_KINDS = {f.name: f.type for f in fields(Run)}
NUMERIC = tuple(k for k, t in _KINDS.items() if t in (Optional[int], Optional[float]))
INTEGER = tuple(k for k, t in _KINDS.items() if t == Optional[int])


def num(s):
    """A CSV field as a float, or None when empty or not a number."""
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def typed(row):
    """A raw.csv row (strings) as results.json has it: the numbers of Run's
    numeric fields as numbers (whole ones of its int fields as ints), empty
    fields as None. Columns Run does not know (older files) pass as text."""
    out = {}
    for k, v in row.items():
        if k in NUMERIC:
            x = num(v)
            out[k] = None if x is None else int(x) if k in INTEGER and x == int(x) else x
        else:
            out[k] = v if v != "" else None
    return out
