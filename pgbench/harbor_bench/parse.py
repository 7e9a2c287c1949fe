"""Parsers for what the harness reads from other programs: pgbench's report,
psql's output (COPY tags, \\conninfo, probe variables), openssl's
fingerprints, `ss`'s listeners, and libpq connection strings; and the
quoting of values written back into connection strings and TOML.

Pure functions over text, each tested on fixture text, so a change in a
tool's output shows up as a failing test rather than an empty CSV column.
"""

import re
from dataclasses import dataclass
from typing import Optional
from urllib.parse import parse_qsl, unquote, urlsplit


@dataclass
class PgbenchReport:
    """The figures of one pgbench run; None where pgbench printed none."""
    tps: Optional[float] = None
    tx: Optional[int] = None
    failed_tx: Optional[int] = None
    latency_ms: Optional[float] = None
    conn_ms: Optional[float] = None


def _first(pattern, text, kind=float):
    m = re.search(pattern, text, re.M)
    return kind(m.group(1)) if m else None


def parse_pgbench(text):
    """pgbench's summary: "tps = 123.4 (without initial connection time)",
    "number of transactions actually processed: 1234", "number of failed
    transactions: 0 (0.000%)", "latency average = 1.2 ms", and "initial
    connection time = 3.4 ms" or, with -C, "average connection time = 0.5 ms"."""
    return PgbenchReport(
        tps=_first(r"^tps = (\d+(?:\.\d*)?)", text),
        tx=_first(r"^number of transactions actually processed: (\d+)", text, int),
        failed_tx=_first(r"^number of failed transactions: (\d+)", text, int),
        latency_ms=_first(r"^latency average = (\d+(?:\.\d*)?) ms", text),
        conn_ms=_first(r"^(?:average|initial) connection time = (\d+(?:\.\d*)?) ms", text))


def count_copies(text, rows):
    """How many of psql's `\\copy` commands completed: lines "COPY <rows>"."""
    return sum(1 for line in text.splitlines() if line == f"COPY {rows}")


def first_match(text, pattern):
    """The first line matching PATTERN (case-insensitive), else the last line:
    the reason shown for a failed run."""
    lines = text.splitlines()
    for line in lines:
        if re.search(pattern, line, re.I):
            return line
    return lines[-1] if lines else ""


def ssl_info(conninfo_output):
    """What psql's \\conninfo says about TLS: "SSL connection (protocol: ...)"."""
    m = re.search(r"SSL connection \(.*\)", conninfo_output)
    return m.group(0) if m else "NO TLS (psql \\conninfo shows no SSL connection)"


def fingerprint(openssl_output):
    """The value of `openssl x509 -noout -fingerprint -sha256`: "sha256 Fingerprint=AB:CD..." -> "AB:CD..."."""
    line = openssl_output.strip().splitlines()[0] if openssl_output.strip() else ""
    return line.split("=", 1)[1] if "=" in line else ""


def probe_vars(psql_output):
    """psql's \\echo of :HOST, :PORT, :USER, :DBNAME (one per line) as a dict."""
    lines = psql_output.splitlines() + [""] * 4
    return dict(zip(("host", "port", "user", "dbname"), lines[:4]))


def listener_pid(ss_output, socket_path=None):
    """The pid in `ss -xlpH` (Unix: the line whose local address is SOCKET_PATH)
    or `ss -ltnpH 'sport = :PORT'` output (the first line): users:(("x",pid=12,fd=3))."""
    for line in ss_output.splitlines():
        cols = line.split()
        if socket_path is not None and (len(cols) < 5 or cols[4] != socket_path):
            continue
        m = re.search(r"pid=(\d+)", line)
        return int(m.group(1)) if m else None
    return None


# ------------------------------------------------------------ conninfo --

def parse_conninfo(text):
    """A libpq connection string as a dict: key=value pairs (values optionally
    in single quotes, with backslash escapes) or a postgresql:// URI. One host
    only: pgbench/run measures one server."""
    text = text.strip()
    if text.startswith(("postgresql://", "postgres://")):
        return parse_uri(text)
    out, i, n = {}, 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        j = i
        while j < n and not text[j].isspace() and text[j] != "=":
            j += 1
        key = text[i:j]
        while j < n and text[j].isspace():
            j += 1
        if not key or j >= n or text[j] != "=":
            raise ValueError(f"missing \"=\" after {key!r} in connection string")
        j += 1
        while j < n and text[j].isspace():
            j += 1
        out[key], i = _conninfo_value(text, j)
    check_one_host(out)
    return out


def _conninfo_value(text, j):
    """The value starting at J (quoted or bare) and the index after it."""
    n, val = len(text), []
    if j < n and text[j] == "'":
        j += 1
        while True:
            if j >= n:
                raise ValueError("unterminated quoted string in connection string")
            c = text[j]
            if c == "\\" and j + 1 < n:
                val.append(text[j + 1])
                j += 2
                continue
            if c == "'":
                return "".join(val), j + 1
            val.append(c)
            j += 1
    while j < n and not text[j].isspace():
        if text[j] == "\\" and j + 1 < n:
            j += 1
        val.append(text[j])
        j += 1
    return "".join(val), j


def parse_uri(text):
    u = urlsplit(text)
    out = {}
    netloc = u.netloc
    if "@" in netloc:
        cred, netloc = netloc.rsplit("@", 1)
        user, sep, pw = cred.partition(":")
        if user:
            out["user"] = unquote(user)
        if sep:
            out["password"] = unquote(pw)
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = netloc.partition(":")
    if host:
        out["host"] = unquote(host)
    if port:
        out["port"] = port
    if u.path.strip("/"):
        out["dbname"] = unquote(u.path[1:])
    for k, v in parse_qsl(u.query, keep_blank_values=True):
        out[k] = v
    check_one_host(out)
    return out


def check_one_host(info):
    for k in ("host", "hostaddr", "port"):
        if "," in info.get(k, ""):
            raise ValueError(f"{k}: one server only, not a list ({info[k]})")


@dataclass
class Endpoint:
    """--pg or --pooler as given: the parts the harness uses by name, and the
    rest (application_name, connect_timeout, ...) passed through as
    key=value pairs; hostaddr and sslmode are dropped, since the harness
    chooses the transport."""
    host: str = ""
    port: str = ""
    user: str = ""
    dbname: str = ""
    password: str = ""
    rest: str = ""


def split_conninfo(text):
    """A connection string (key=value or URI) as an Endpoint."""
    info = parse_conninfo(text)
    named = ("host", "port", "user", "dbname", "password")
    rest = " ".join(f"{k}={quote_value(v)}" for k, v in info.items()
                    if k not in named + ("hostaddr", "sslmode"))
    return Endpoint(**{k: info.get(k, "") for k in named}, rest=rest)


def quote_value(v):
    """A value as libpq's key=value syntax wants it."""
    if v and re.fullmatch(r"[A-Za-z0-9_./:@%+,-]+", v):
        return v
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def toml_quote(v):
    """A value as a TOML basic string."""
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
