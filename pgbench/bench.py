#!/usr/bin/env python3
"""Helpers for pgbench/run (Python 3.11, standard library only).

  bench.py scram-secret PASSWORD ITERATIONS
      Print a PostgreSQL SCRAM-SHA-256 secret for PASSWORD with a fresh random
      salt: SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey> (RFC 5802/7677),
      the form `ALTER ROLE ... PASSWORD '<secret>'` stores as is. PostgreSQL 15
      cannot lower the iteration count itself, hence this.

  bench.py free-port START
      Print the first TCP port >= START that can be bound on 127.0.0.1.

  bench.py export RAW_CSV OUT_DIR [IDLE_CSV]
      Write OUT_DIR/results.json (every run, the per-cell medians and the
      ratios: pgharbor / direct, pgharbor / PgBouncer, PgBouncer / direct,
      TLS / plain, and with a pgharbor-base target (--baseline-bin) pgharbor /
      pgharbor-base of throughput and of pooler CPU; each as the ratio of the
      medians and as paired per-round ratios), OUT_DIR/medians.csv (with a
      baseline: pgharbor's rows also carry both ratios to pgharbor-base), and
      the gnuplot input for the plots:
      OUT_DIR/plots/<workload>.dat and .gp (tps or MB/s by transport x TLS,
      one bar per target), rendered by `gnuplot <workload>.gp` to an SVG.
      With IDLE_CSV, results.json also holds the idle-client memory rows.

  bench.py summarize RAW_CSV [IDLE_CSV]
      Print the Markdown summary of the per-run CSV written by pgbench/run:
      median tps (MB/s for bulk) per (workload, transport, target), ratios of
      pgharbor to direct PostgreSQL and to PgBouncer, TLS / plain ratios,
      pooler CPU per login, per transaction and per GB, the persistent
      workloads at a glance (tps, latency, CPU per transaction), the memory
      per idle client (IDLE_CSV, written by pgbench/idle.py), issue 3's, 4's
      and 6's targets checked, pgharbor / pgharbor-base per cell when there is
      a baseline build (--baseline-bin), and the machine-load notes.

  bench.py conninfo-shell PREFIX CONNINFO
      Parse a libpq connection string (key=value pairs or a postgresql:// URI)
      and print shell assignments PREFIX_HOST, PREFIX_PORT, PREFIX_USER,
      PREFIX_DBNAME, PREFIX_PASSWORD (empty when absent) and PREFIX_REST (the
      other keywords as key=value pairs, hostaddr and sslmode left out, since
      pgbench/run chooses the transport), for `eval`.
"""

import base64
import csv
import hashlib
import hmac
import os
import re
import shlex
import socket
import statistics
import sys
from collections import defaultdict
from urllib.parse import parse_qsl, unquote, urlsplit

# Display names and orders; unknown values are shown as they are, after these.
# "pooler" is a pooler pgbench/run did not start (--pooler CONNINFO);
# "pgharbor-base" another pgharbor build with pgharbor's config (--baseline-bin).
TARGETS = {"direct": "PostgreSQL direct", "pgharbor": "pgharbor", "pgharbor-base": "pgharbor-base",
           "pgbouncer": "PgBouncer", "pgharbor-notls": "pgharbor, no [tls]",
           "pooler": "pooler under test (--pooler)"}
SHORT = {"direct": "PostgreSQL", "pgharbor": "pgharbor", "pgharbor-base": "pgharbor-base",
         "pgbouncer": "PgBouncer", "pgharbor-notls": "pgharbor (no [tls])", "pooler": "pooler"}
BASE = "pgharbor-base"
BASE_BAR = 0.98  # pgharbor / pgharbor-base: a refactor may cost at most noise
TRANSPORTS = {"unix": "Unix socket", "tcp": "TCP plain",
              "tcp-tls-ecdsa": "TCP + TLS (ECDSA P-256)", "tcp-tls-rsa": "TCP + TLS (RSA-2048)"}
WORKLOADS = {"connect": "Connect per transaction", "connect8": "Connect per transaction, 8 clients",
             "establish": "Establishment only (connect, authenticate, disconnect)",
             "persistent": "Persistent select-only, 16 clients", "tpcb": "TPC-B-like, 16 clients",
             "bulk": "Bulk COPY out", "bulkselect": "Bulk SELECT"}
# Persistent workloads at any client count: persistent<N> (pgbench -S) and
# tpcb<N> (the default script); plain "persistent" and "tpcb" are N = 16.
PERSISTENT_RE = re.compile(r"(persistent|tpcb)(\d*)")
BULK = ("bulk", "bulkselect")  # measured in MB/s
LOGINS = ("connect", "connect8", "establish")  # a transaction is a login
POOLERS = ("pgharbor", "pgharbor-base", "pgbouncer", "pgharbor-notls", "pooler")
MODE_TARGETS = ("pgharbor", "pgharbor-base", "pgbouncer", "pgharbor-notls")  # run in --pool-mode
TLS_PREFIX = "tcp-tls-"


def persistent_clients(w):
    """(family, clients) of a persistent workload id, or None: tpcb64 -> ("tpcb", 64)."""
    m = PERSISTENT_RE.fullmatch(w)
    if not m or m.group(2).startswith("0"):
        return None
    return m.group(1), int(m.group(2) or 16)


def workload_title(w):
    if w in WORKLOADS:
        return WORKLOADS[w]
    p = persistent_clients(w)
    if p:
        return f"{WORKLOADS[p[0]].rsplit(',', 1)[0]}, {p[1]} clients"
    return w


def workload_order(values):
    """Known workloads first, in WORKLOADS order, persistent ones by client count; then the rest."""
    base = list(WORKLOADS)

    def key(w):
        p = persistent_clients(w)
        if p:
            return (base.index(p[0]), p[1], w)
        return (base.index(w), 0, w) if w in base else (len(base), 0, w)
    return sorted(set(values), key=key)


def target_labels(rows):
    """Display name per target; the poolers started by pgbench/run with their pool mode."""
    modes = {}
    for r in rows:
        if r.get("pool_mode"):
            modes.setdefault(r["target"], r["pool_mode"])
    out = {}
    for g in {r["target"] for r in rows}:
        name = TARGETS.get(g, g)
        if g in MODE_TARGETS:
            mode = modes.get(g, "session")  # raw.csv files from before the column: session
            name = f"pgharbor {mode}, no [tls]" if g == "pgharbor-notls" else f"{name} {mode}"
        out[g] = name
    return out


def subject(targets):
    """The pooler the ratios are about: pgharbor, else an external one (--pooler)."""
    return next((g for g in ("pgharbor", "pooler") if g in targets), None)


# ------------------------------------------------------------ conninfo --

CONNINFO_SEP = re.compile(r"\s*=\s*")


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
        val = []
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
                    j += 1
                    break
                val.append(c)
                j += 1
        else:
            while j < n and not text[j].isspace():
                if text[j] == "\\" and j + 1 < n:
                    j += 1
                val.append(text[j])
                j += 1
        out[key] = "".join(val)
        i = j
    check_one_host(out)
    return out


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


def quote_value(v):
    """A value as libpq's key=value syntax wants it."""
    if v and re.fullmatch(r"[A-Za-z0-9_./:@%+,-]+", v):
        return v
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def conninfo_shell(prefix, text):
    """Shell assignments for pgbench/run (see the module doc)."""
    info = parse_conninfo(text)
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", prefix):
        raise ValueError(f"bad prefix {prefix!r}")
    lines = [f"{prefix}_{k.upper()}={shlex.quote(info.get(k, ''))}"
             for k in ("host", "port", "user", "dbname", "password")]
    rest = " ".join(f"{k}={quote_value(v)}" for k, v in info.items()
                    if k not in ("host", "hostaddr", "port", "user", "dbname", "password", "sslmode"))
    lines.append(f"{prefix}_REST={shlex.quote(rest)}")
    return "\n".join(lines)


def scram_secret(password: str, iterations: int) -> str:
    b64 = lambda b: base64.b64encode(b).decode("ascii")  # noqa: E731
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def free_port(start: int) -> int:
    for port in range(start, min(start + 200, 65536)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            # Servers bind with SO_REUSEADDR; do the same so TIME_WAIT leftovers
            # of an earlier run do not make a usable port look taken.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit(f"no free TCP port in {start}..{start + 199}")


def ordered(values, known):
    vals = set(values)
    return [k for k in known if k in vals] + sorted(vals - set(known))


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def fmt_tps(x):
    if x is None:
        return "–"
    return f"{x:,.0f}".replace(",", " ") if x >= 100 else f"{x:.1f}"


def fmt_ratio(a, b):
    if a is None or not b:
        return "–"
    return f"{a / b:.2f}x"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    """(max - min) / median, in percent: how much the runs of one cell disagree."""
    xs = [x for x in xs if x is not None]
    if len(xs) < 2:
        return None
    m = statistics.median(xs)
    return 100.0 * (max(xs) - min(xs)) / m if m else None


def unit(workload):
    return "MB/s" if workload in BULK else "tps"


def value(r):
    """The run's throughput: MB/s for bulk runs, tps otherwise."""
    return num(r.get("mb_per_s")) if r["workload"] in BULK else num(r["tps"])


# ------------------------------------------------- medians, ratios, export --

NUMERIC = ("round", "load1_before", "ncpu", "other_cpus", "rc", "tps", "tx", "failed_tx",
           "latency_ms", "conn_ms", "wall_s", "pooler_cpu_s", "pooler_us_per_tx", "pg_cpu_s",
           "pgbench_cpu_s", "bytes", "mb_per_s", "pooler_s_per_gb")
INTEGER = ("round", "ncpu", "rc", "tx", "failed_tx", "bytes")
RATIO_PAIRS = (("pgharbor", "direct"), ("pgharbor", "pgbouncer"), ("pgbouncer", "direct"),
               ("pgharbor", "pgharbor-notls"), ("pooler", "direct"), ("pooler", "pgbouncer"),
               ("pgharbor", BASE))
# Pairs whose pooler CPU (per transaction / per GB) is compared too.
CPU_RATIO_PAIRS = (("pgharbor", BASE),)


def load_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def typed(row):
    """A raw.csv row with numbers as numbers and empty fields as None."""
    out = {}
    for k, v in row.items():
        if k in NUMERIC:
            x = num(v)
            out[k] = None if x is None else int(x) if k in INTEGER and x == int(x) else x
        else:
            out[k] = v if v != "" else None
    return out


def cpu_field(workload):
    return "pooler_s_per_gb" if workload in BULK else "pooler_us_per_tx"


def cpu_title(w):
    if w == "bulk":
        return "Pooler CPU per GB of COPY text (bulk), CPU seconds"
    if w == "bulkselect":
        return "Pooler CPU per GB of result text (bulk SELECT), CPU seconds"
    what = "login" if w in LOGINS else "transaction"
    return f"Pooler CPU per {what} ({workload_title(w)}), µs"


def ok_values(rows, w, t, g, field=None):
    return [num(r[field]) if field else value(r) for r in rows
            if (r["workload"], r["transport"], r["target"]) == (w, t, g) and r["status"] == "ok"]


def paired_ratios(rows, w, a, b, field=None):
    """Per-round ratios of cell a = (transport, target) to cell b in workload w, sorted;
    of the throughput, or of FIELD (e.g. pooler_us_per_tx)."""
    def by_round(t, g):
        return {r["round"]: num(r[field]) if field else value(r) for r in rows
                if (r["workload"], r["transport"], r["target"]) == (w, t, g) and r["status"] == "ok"}
    x, y = by_round(*a), by_round(*b)
    return sorted(x[k] / y[k] for k in x.keys() & y.keys() if x[k] and y[k])


def cell_medians(rows):
    """One dict per (workload, transport, target) cell, in display order."""
    keys = {(r["workload"], r["transport"], r["target"]) for r in rows}
    out = []
    for w in workload_order([k[0] for k in keys]):
        for t in ordered([k[1] for k in keys], TRANSPORTS):
            for g in ordered([k[2] for k in keys], TARGETS):
                if (w, t, g) not in keys:
                    continue
                runs = [r for r in rows if (r["workload"], r["transport"], r["target"]) == (w, t, g)]
                vals = ok_values(rows, w, t, g)
                s = spread(vals)
                out.append({"workload": w, "transport": t, "target": g, "unit": unit(w),
                            "runs": len(runs), "ok_runs": len(vals), "median": median(vals),
                            "spread_pct": None if s is None else round(s, 2),
                            "latency_ms": median(ok_values(rows, w, t, g, "latency_ms")),
                            "pooler_cpu": median(ok_values(rows, w, t, g, cpu_field(w))),
                            "pooler_cpu_unit": "s/GB" if w in BULK else "µs/tx",
                            "flagged_runs": sum(1 for r in runs if r["flags"])})
    return out


def ratio(a, b):
    return a / b if a is not None and b else None


def ratios(rows):
    """pgharbor / direct, pgharbor / PgBouncer, PgBouncer / direct (and pgharbor
    with / without [tls], pgharbor / pgharbor-base) per cell, and TLS / plain per
    target: the ratio of the medians and the paired per-round ratios (median,
    min, max); metric "throughput" (tps or MB/s). pgharbor / pgharbor-base also
    as kind "pgharbor/pgharbor-base cpu", metric "pooler_cpu": the pooler's CPU
    per transaction (per GB for bulk), where below 1 means the new build is
    cheaper."""
    cells = {(c["workload"], c["transport"], c["target"]): c for c in cell_medians(rows)}
    out = []

    def add(kind, w, num_cell, den_cell, cpu=False):
        if (w, *num_cell) not in cells or (w, *den_cell) not in cells:
            return
        key = "pooler_cpu" if cpu else "median"
        p = paired_ratios(rows, w, num_cell, den_cell, cpu_field(w) if cpu else None)
        out.append({"kind": kind, "workload": w,
                    "metric": "pooler_cpu" if cpu else "throughput",
                    "unit": cells[(w, *num_cell)]["pooler_cpu_unit" if cpu else "unit"],
                    "numerator": {"transport": num_cell[0], "target": num_cell[1]},
                    "denominator": {"transport": den_cell[0], "target": den_cell[1]},
                    "ratio_of_medians": ratio(cells[(w, *num_cell)][key], cells[(w, *den_cell)][key]),
                    "paired_median": statistics.median(p) if p else None,
                    "paired_min": p[0] if p else None, "paired_max": p[-1] if p else None,
                    "pairs": len(p)})

    for (w, t, g) in cells:
        for a, b in RATIO_PAIRS:
            if g == a:
                add(f"{a}/{b}", w, (t, a), (t, b))
        for a, b in CPU_RATIO_PAIRS:
            if g == a:
                add(f"{a}/{b} cpu", w, (t, a), (t, b), cpu=True)
        if t.startswith(TLS_PREFIX):
            add("tls/plain", w, (t, g), ("tcp", g))
    return out


def medians_csv(rows, path):
    """One line per cell; with a pgharbor-base target (--baseline-bin) two more
    columns, filled on pgharbor's lines: its throughput and pooler CPU over
    pgharbor-base's in the same cell (ratio of the medians)."""
    cells = cell_medians(rows)
    cols = ["workload", "transport", "target", "unit", "runs", "ok_runs", "median", "spread_pct",
            "latency_ms", "pooler_cpu", "pooler_cpu_unit", "flagged_runs"]
    with_base = any(c["target"] == BASE for c in cells)
    if with_base:
        cols += ["vs_base", "cpu_vs_base"]
        by = {(c["workload"], c["transport"], c["target"]): c for c in cells}
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for c in cells:
            line = dict(c)
            if with_base:
                b = by.get((c["workload"], c["transport"], BASE)) if c["target"] == "pgharbor" else None
                line["vs_base"] = ratio(c["median"], b["median"]) if b else None
                line["cpu_vs_base"] = ratio(c["pooler_cpu"], b["pooler_cpu"]) if b else None
            w.writerow({k: ("" if line[k] is None else line[k]) for k in cols})


def results_json(rows):
    return {"runs": [typed(r) for r in rows], "medians": cell_medians(rows), "ratios": ratios(rows)}


def plot_files(rows, outdir):
    """gnuplot inputs: per workload a .dat (rows: transports; columns: targets;
    '-' = not measured) and a .gp writing <workload>.svg. Returns the .gp files."""
    os.makedirs(outdir, exist_ok=True)
    cells = cell_medians(rows)
    made = []
    labels = target_labels(rows)
    for w in workload_order({c["workload"] for c in cells}):
        cs = [c for c in cells if c["workload"] == w]
        ts = ordered({c["transport"] for c in cs}, TRANSPORTS)
        gs = ordered({c["target"] for c in cs}, TARGETS)
        m = {(c["transport"], c["target"]): c["median"] for c in cs}
        with open(os.path.join(outdir, f"{w}.dat"), "w") as f:
            f.write("transport " + " ".join(f'"{labels[g]}"' for g in gs) + "\n")
            for t in ts:
                vals = [m.get((t, g)) for g in gs]
                f.write(f'"{TRANSPORTS.get(t, t)}" '
                        + " ".join("-" if v is None else f"{v:.1f}" for v in vals) + "\n")
        gp = os.path.join(outdir, f"{w}.gp")
        with open(gp, "w") as f:
            f.write(f"""set terminal svg size 900,500 dynamic font "sans,12"
set output "{w}.svg"
set title "{workload_title(w)}: {unit(w)} by transport x TLS (median)"
set ylabel "{unit(w)}"
set yrange [0:*]
set datafile missing "-"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key top right
set grid ytics
plot for [i=2:{len(gs) + 1}] "{w}.dat" using i:xtic(1) title columnheader(i)
""")
        made.append(gp)
    return made


def export(path, outdir, idle_path=None):
    import json
    rows = load_rows(path)
    data = results_json(rows)
    if idle_path and os.path.exists(idle_path):
        data["idle"] = idle_json(load_rows(idle_path))
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(data, f, indent=1, ensure_ascii=False)
        f.write("\n")
    medians_csv(rows, os.path.join(outdir, "medians.csv"))
    plot_files(rows, os.path.join(outdir, "plots"))


def workload_short(w):
    """A table row's name: "select-only -c 64", "TPC-B-like -c 16"."""
    p = persistent_clients(w)
    if not p:
        return w
    return f"{'select-only' if p[0] == 'persistent' else 'TPC-B-like'} -c {p[1]}"


def glance_table(rows, labels, med, has):
    """The persistent workloads in one table: per cell and target the median tps,
    latency and pooler CPU per transaction, and the subject's ratios to PgBouncer."""
    workloads = [w for w in workload_order([r["workload"] for r in rows]) if persistent_clients(w)]
    if not workloads:
        return []
    transports = ordered([r["transport"] for r in rows], TRANSPORTS)
    targets = [g for g in ordered([r["target"] for r in rows], TARGETS) if g != "pgharbor-notls"]
    subj = subject(targets)
    vs = subj and "pgbouncer" in targets
    vb = subj == "pgharbor" and BASE in targets
    out = ["### Persistent workloads at a glance: median tps, latency, pooler CPU per transaction\n"]
    head = "| workload | transport | " + " | ".join(labels[g] for g in targets)
    if vs:
        head += f" | {SHORT[subj]} / PgBouncer tps | {SHORT[subj]} / PgBouncer CPU per tx"
    if vb:
        head += f" | pgharbor / {BASE} tps | pgharbor / {BASE} CPU per tx"
    out.append(head + " |")
    out.append("| --- | --- |" + " ---: |" * (len(targets) + (2 if vs else 0) + (2 if vb else 0)))
    for w in workloads:
        for t in transports:
            if not any(has(w, t, g) for g in targets):
                continue
            cells = []
            for g in targets:
                if not has(w, t, g):
                    cells.append("")
                    continue
                tps, lat = med(w, t, g), med(w, t, g, "latency_ms")
                if tps is None:
                    cells.append("failed")
                    continue
                text = f"{fmt_tps(tps)} tps"
                if lat is not None:
                    text += f", {lat:.2f} ms"
                cpu = med(w, t, g, "pooler_us_per_tx") if g in POOLERS else None
                if cpu is not None:
                    text += f", {cpu:.1f} µs"
                cells.append(text)
            line = f"| {workload_short(w)} | {TRANSPORTS.get(t, t)} | " + " | ".join(cells)
            if vs:
                line += (f" | {fmt_ratio(med(w, t, subj), med(w, t, 'pgbouncer'))}"
                         f" | {fmt_ratio(med(w, t, subj, 'pooler_us_per_tx'), med(w, t, 'pgbouncer', 'pooler_us_per_tx'))}")
            if vb:
                line += (f" | {fmt_ratio(med(w, t, subj), med(w, t, BASE))}"
                         f" | {fmt_ratio(med(w, t, subj, 'pooler_us_per_tx'), med(w, t, BASE, 'pooler_us_per_tx'))}")
            out.append(line + " |")
    out.append("")
    out.append("(tps and pgbench's average latency; µs = the pooler's CPU time (utime+stime) per "
               "transaction. Direct PostgreSQL has one server process per client; the poolers share "
               "their pool among the clients.)\n")
    return out


def baseline_table(rows, med, has, paired):
    """pgharbor / pgharbor-base (--baseline-bin: another build, same config, run
    next to pgharbor in each cell, the order reversed every other round) for
    every cell both ran: throughput and pooler CPU, with the refactor bar
    (>= BASE_BAR on throughput)."""
    targets = {r["target"] for r in rows}
    if "pgharbor" not in targets or BASE not in targets:
        return []
    mine = [r for r in rows if r["target"] == BASE]
    out = [f"### pgharbor / {BASE}: the build under test over the baseline build (--baseline-bin), same run\n"]
    if mine and not any(r["status"] == "ok" for r in mine):
        out.append(f"- not measured: no {BASE} run succeeded (first: {mine[0]['status']})")
        out.append("")
        return out
    out.append(f"| workload | transport | pgharbor | {BASE} | ratio | paired per round | pooler CPU, pgharbor "
               f"| pooler CPU, {BASE} | CPU ratio | CPU ratio, paired | ≥ {BASE_BAR:.2f}x |")
    out.append("| --- | --- |" + " ---: |" * 8 + " --- |")
    below, n = [], 0
    for w in workload_order([r["workload"] for r in rows]):
        field = cpu_field(w)
        fmt = (lambda m: f"{m:.2f} s/GB") if w in BULK else (lambda m: f"{m:.1f} µs")  # noqa: E731
        for t in ordered([r["transport"] for r in rows], TRANSPORTS):
            if not (has(w, t, "pgharbor") and has(w, t, BASE)):
                continue
            a, b = med(w, t, "pgharbor"), med(w, t, BASE)
            ca, cb = med(w, t, "pgharbor", field), med(w, t, BASE, field)
            p = paired(w, (t, "pgharbor"), (t, BASE))
            pc = paired(w, (t, "pgharbor"), (t, BASE), field)
            v = verdict(ratio(a, b), p, BASE_BAR)
            if ratio(a, b) is not None:
                n += 1
                if not v.startswith("MET"):
                    below.append(f"{w}/{TRANSPORTS.get(t, t)} {fmt_ratio(a, b)}")
            out.append(f"| {w} | {TRANSPORTS.get(t, t)} | {fmt_tps(a)} {unit(w)} | {fmt_tps(b)} {unit(w)} "
                       f"| {fmt_ratio(a, b)} | {fmt_pair(p)} | {'–' if ca is None else fmt(ca)} "
                       f"| {'–' if cb is None else fmt(cb)} | {fmt_ratio(ca, cb)} | {fmt_pair(pc)} | **{v}** |")
    out.append("")
    out.append(f"- pgharbor at or above {BASE_BAR:.2f}x {BASE} on throughput: {n - len(below)} of {n} cells"
               + (("; not: " + "; ".join(below)) if below else ""))
    out.append("- (ratio: of the medians; paired: median (range) of the per-round ratios of the two runs "
               "made back to back; CPU ratio below 1.00x = the build under test uses less pooler CPU "
               "per transaction / per GB.)")
    out.append("")
    return out


def fmt_pair(ratios):
    """Paired ratios as "median (min–max)"."""
    if not ratios:
        return "–"
    text = f"{statistics.median(ratios):.2f}x"
    if len(ratios) > 1:
        text += f" ({ratios[0]:.2f}–{ratios[-1]:.2f})"
    return text


def issue4_checks(rows, med, has, paired):
    """Issue 4's bar in transaction mode: pgharbor's tps >= 1.2x PgBouncer's with no
    more CPU per transaction, per persistent cell."""
    mode = {r["target"]: r.get("pool_mode") for r in rows if r.get("pool_mode")}
    if mode.get("pgharbor") != "transaction" or "pgbouncer" not in mode:
        return []
    mine = [r for r in rows if r["target"] == "pgharbor" and persistent_clients(r["workload"])]
    if mine and not any(r["status"] == "ok" for r in mine):
        return [f"- not measured: no pgharbor run succeeded (first: {mine[0]['status']})"]
    out = []
    for w in workload_order([r["workload"] for r in rows]):
        if not persistent_clients(w):
            continue
        for t in ordered([r["transport"] for r in rows], TRANSPORTS):
            if not (has(w, t, "pgharbor") and has(w, t, "pgbouncer")):
                continue
            a, b = med(w, t, "pgharbor"), med(w, t, "pgbouncer")
            p = paired(w, (t, "pgharbor"), (t, "pgbouncer"))
            line = (f"- {workload_short(w)}, {TRANSPORTS.get(t, t)}: pgharbor / PgBouncer tps = "
                    f"{fmt_ratio(a, b)}; ≥ 1.2x: **{verdict(ratio(a, b), p, 1.2)}**")
            ca, cb = med(w, t, "pgharbor", "pooler_us_per_tx"), med(w, t, "pgbouncer", "pooler_us_per_tx")
            if ca is not None and cb is not None:
                line += (f"; CPU per transaction {ca:.1f} vs {cb:.1f} µs, no more than PgBouncer's: "
                         f"**{'MET' if ca <= cb else 'NOT MET'}**")
            if a is None:
                why = next((r["status"] for r in rows if (r["workload"], r["transport"], r["target"])
                            == (w, t, "pgharbor") and r["status"] != "ok"), "")
                line += f" (pgharbor: {why})" if why else ""
            out.append(line)
    return out


IDLE_TRANSPORTS = {"unix": "Unix socket", "tcp": "TCP plain", "tcp-tls": "TCP + TLS"}
IDLE_NUMERIC = ("clients", "connected", "failed", "rss_before_kib", "rss_after_kib")


def idle_json(rows):
    out = []
    for r in rows:
        d = dict(r)
        for k in IDLE_NUMERIC:
            d[k] = int(r[k]) if num(r.get(k)) is not None else None
        for k in ("kib_per_client", "seconds"):
            d[k] = num(r.get(k))
        d["error"] = r.get("error") or None
        out.append(d)
    return out


def idle_table(rows):
    """Memory per idle client (pgbench/idle.py's rows), with issue 4's 2x bar."""
    if not rows:
        return []
    labels = target_labels(rows)
    targets = ordered([r["target"] for r in rows], TARGETS)
    transports = ordered([r["transport"] for r in rows], IDLE_TRANSPORTS)
    per = defaultdict(list)
    for r in rows:
        per[(r["target"], r["transport"])].append(r)

    def kib(g, t):
        return median([num(r["kib_per_client"]) for r in per.get((g, t), [])])

    n = max(int(num(r["clients"]) or 0) for r in rows)
    out = [f"### Memory per idle client: VmRSS growth / clients logged in, KiB ({n} idle clients "
           "per transport, one transport at a time)\n"]
    out.append("| pooler | " + " | ".join(IDLE_TRANSPORTS.get(t, t) for t in transports)
               + " | logged in |")
    out.append("| --- |" + " ---: |" * len(transports) + " --- |")
    notes = []
    for g in targets:
        cells, counts = [], []
        for t in transports:
            rs = per.get((g, t))
            if not rs:
                cells.append("")
                continue
            k = kib(g, t)
            cells.append("–" if k is None else f"{k:.2f}")
            counts.append(f"{IDLE_TRANSPORTS.get(t, t)} {rs[0]['connected']}/{rs[0]['clients']}")
            for r in rs:
                if r.get("error"):
                    notes.append(f"- {labels[g]}, {IDLE_TRANSPORTS.get(t, t)}: {r['failed']} of "
                                 f"{r['clients']} logins failed, first: {r['error']}")
        out.append(f"| {labels[g]} | " + " | ".join(cells) + " | " + "; ".join(counts) + " |")
    subj = subject(targets)
    if subj and "pgbouncer" in targets:
        out.append(f"| {SHORT[subj]} / PgBouncer | " + " | ".join(
            fmt_ratio(kib(subj, t), kib("pgbouncer", t)) for t in transports) + " | |")
    if subj == "pgharbor" and BASE in targets:
        out.append(f"| pgharbor / {BASE} | " + " | ".join(
            fmt_ratio(kib(subj, t), kib(BASE, t)) for t in transports) + " | |")
    out.append("")
    out.extend(notes)
    if subj == "pgharbor" and "pgbouncer" in targets:
        for t in transports:
            a, b = kib("pgharbor", t), kib("pgbouncer", t)
            if a is None or b is None:
                continue
            ok = b > 0 and a <= 2 * b
            out.append(f"- Issue 4: memory per idle client within 2x PgBouncer's, "
                       f"{IDLE_TRANSPORTS.get(t, t)}: {a:.2f} vs {b:.2f} KiB: **{'MET' if ok else 'NOT MET'}**")
    out.append("")
    return out


def verdict(ratio, pairs, bar):
    """MET / NOT MET when the ratio of the medians and the median of the
    per-round ratios agree; otherwise say the runs do not settle it."""
    if ratio is None:
        return "not measured"
    votes = {ratio >= bar} | ({statistics.median(pairs) >= bar} if pairs else set())
    if votes == {True}:
        text = "MET"
    elif votes == {False}:
        text = "NOT MET"
    else:
        text = "UNRESOLVED (ratio of medians and paired ratios disagree)"
    if pairs and pairs[0] < bar <= pairs[-1]:
        text += f", paired runs on both sides of {bar}x"
    return text


def summarize(path: str, idle_path=None) -> None:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path}: no runs")

    cells = defaultdict(list)  # (workload, transport, target) -> rows
    for r in rows:
        cells[(r["workload"], r["transport"], r["target"])].append(r)
    workloads = workload_order([r["workload"] for r in rows])
    transports = ordered([r["transport"] for r in rows], TRANSPORTS)
    tls_transports = [t for t in transports if t.startswith(TLS_PREFIX)]
    targets = ordered([r["target"] for r in rows], TARGETS)
    labels = target_labels(rows)
    subj = subject(targets)
    rounds = len({r["round"] for r in rows})
    out = []

    def ok_rows(w, t, g):
        return [r for r in cells.get((w, t, g), []) if r["status"] == "ok"]

    def med(w, t, g, field=None):
        return median([num(r[field]) if field else value(r) for r in ok_rows(w, t, g)])

    def by_round(w, t, g, field=None):
        return {r["round"]: num(r[field]) if field else value(r) for r in ok_rows(w, t, g)}

    def paired(w, a, b, field=None):
        """Per-round ratios of cell a = (transport, target) to cell b, sorted."""
        x, y = by_round(w, *a, field), by_round(w, *b, field)
        return sorted(x[k] / y[k] for k in x.keys() & y.keys() if x[k] and y[k])

    def has(w, t, g):
        return bool(cells.get((w, t, g)))

    # -- throughput per workload, with pgharbor's ratios
    for w in workloads:
        example = next(r for r in rows if r["workload"] == w)
        cols = [t for t in transports if any(has(w, t, g) for g in targets)]
        out.append(f"### {workload_title(w)} (`{example['command']}`), {unit(w)}, "
                   f"median of {rounds} round(s)\n")
        out.append("| target | " + " | ".join(TRANSPORTS.get(t, t) for t in cols) + " |")
        out.append("| --- |" + " ---: |" * len(cols))
        for g in targets:
            if not any(has(w, t, g) for t in cols):
                continue
            line = []
            for t in cols:
                runs = cells.get((w, t, g), [])
                if not runs:
                    line.append("")
                    continue
                ok = [value(r) for r in runs if r["status"] == "ok"]
                m, s = median(ok), spread(ok)
                text = fmt_tps(m)
                if s is not None:
                    text += f" (±{s / 2:.0f}%)"
                bad = len(runs) - len(ok)
                if bad:
                    text += f" [{bad} failed]"
                line.append(text)
            out.append(f"| {labels[g]} | " + " | ".join(line) + " |")
        pairs = [(subj, "direct"), (subj, "pgbouncer"), ("pgbouncer", "direct")]
        if subj == "pgharbor":
            pairs.insert(2, (subj, BASE))
        for a, b in pairs:
            if a not in targets or b not in targets:
                continue
            ratios = [fmt_ratio(med(w, t, a), med(w, t, b)) for t in cols]
            out.append(f"| {SHORT[a]} / {SHORT[b]} | " + " | ".join(ratios) + " |")
            if a == subj:
                out.append(f"| {SHORT[a]} / {SHORT[b]}, paired per round | "
                           + " | ".join(fmt_pair(paired(w, (t, a), (t, b))) for t in cols) + " |")
        out.append("")
    out.append("(±x% = half the range of the runs, relative to the median. Ratios: of the medians;"
               " \"paired per round\": median, and range, of the ratios of runs made back to back"
               " in the same round, which cancels slow drift in the machine's load.)\n")

    # -- what TLS costs each target: TLS cell / TCP plain cell, same target, same round
    if tls_transports and "tcp" in transports:
        cols = [(w, t) for w in workloads for t in tls_transports]
        out.append("### TLS / plain: TCP + TLS over TCP plain, per target "
                   "(paired per round: median (range))\n")
        out.append("| target | " + " | ".join(
            f"{w} {unit(w)}, {t[len(TLS_PREFIX):].upper()}" for w, t in cols) + " |")
        out.append("| --- |" + " ---: |" * len(cols))
        for g in targets:
            if not any(has(w, t, g) for w, t in cols):
                continue
            out.append(f"| {labels[g]} | " + " | ".join(
                fmt_pair(paired(w, (t, g), ("tcp", g))) for w, t in cols) + " |")
        out.append("")

    # -- pooler CPU
    poolers = [g for g in POOLERS if g in targets]
    cpu_tables = [(w, cpu_field(w), cpu_title(w)) for w in workloads]
    for w, field, title in cpu_tables:
        if w not in workloads or not poolers:
            continue
        cols = [t for t in transports if any(has(w, t, g) for g in poolers)]
        out.append(f"### {title} (median; utime+stime from /proc/PID/stat)\n")
        out.append("| pooler | " + " | ".join(TRANSPORTS.get(t, t) for t in cols) + " |")
        out.append("| --- |" + " ---: |" * len(cols))
        fmt = (lambda m: f"{m:.2f}") if w in BULK else (lambda m: f"{m:.1f}")  # noqa: E731
        for g in poolers:
            if not any(has(w, t, g) for t in cols):
                continue
            vals = []
            for t in cols:
                m = med(w, t, g, field)
                vals.append("" if not has(w, t, g) else "–" if m is None else fmt(m))
            out.append(f"| {labels[g]} | " + " | ".join(vals) + " |")
        if subj in poolers and "pgbouncer" in poolers:
            out.append(f"| {SHORT[subj]} / PgBouncer | " + " | ".join(
                fmt_ratio(med(w, t, subj, field), med(w, t, "pgbouncer", field))
                for t in cols) + " |")
        if subj == "pgharbor" and BASE in poolers:
            out.append(f"| pgharbor / {BASE} | " + " | ".join(
                fmt_ratio(med(w, t, subj, field), med(w, t, BASE, field)) for t in cols) + " |")
        out.append("")

    # -- the persistent workloads at a glance, and issue 4's targets
    out.extend(glance_table(rows, labels, med, has))
    out.extend(baseline_table(rows, med, has, paired))
    if idle_path and os.path.exists(idle_path):
        out.extend(idle_table(load_rows(idle_path)))
    checks4 = issue4_checks(rows, med, has, paired)
    if checks4:
        out.append("### Issue 4's targets (transaction pooling, same run)\n")
        out.extend(checks4)
        out.append("")

    # -- issue 3's targets
    checks = []

    def ratio_of(w, t, a, b):
        x, y = med(w, t, a), med(w, t, b)
        return x / y if x is not None and y else None

    for t in tls_transports:
        cert = t[len(TLS_PREFIX):].upper()
        if "connect" in workloads and "pgbouncer" in targets and "pgharbor" in targets:
            r = ratio_of("connect", t, "pgharbor", "pgbouncer")
            cpu_a = med("connect", t, "pgharbor", "pooler_us_per_tx")
            cpu_b = med("connect", t, "pgbouncer", "pooler_us_per_tx")
            cpu = (f"; pooler CPU per TLS login {cpu_a:.0f} µs vs {cpu_b:.0f} µs"
                   if cpu_a is not None and cpu_b is not None else "")
            checks.append(
                f"- TLS connect per transaction, {cert} certificate on both poolers: pgharbor / PgBouncer "
                f"= {fmt_ratio(med('connect', t, 'pgharbor'), med('connect', t, 'pgbouncer'))} "
                f"(paired {fmt_pair(paired('connect', (t, 'pgharbor'), (t, 'pgbouncer')))}); "
                f"target ≥ 1.3x: **{verdict(r, paired('connect', (t, 'pgharbor'), (t, 'pgbouncer')), 1.3)}**{cpu}")
        if "bulk" in workloads and "direct" in targets and "pgharbor" in targets:
            r = ratio_of("bulk", t, "pgharbor", "direct")
            bouncer = ""
            if "pgbouncer" in targets:
                bouncer = (f"; PgBouncer / PostgreSQL = "
                           f"{fmt_ratio(med('bulk', t, 'pgbouncer'), med('bulk', t, 'direct'))}")
            checks.append(
                f"- TLS bulk, {cert} certificate: pgharbor / PostgreSQL direct = "
                f"{fmt_ratio(med('bulk', t, 'pgharbor'), med('bulk', t, 'direct'))} "
                f"(paired {fmt_pair(paired('bulk', (t, 'pgharbor'), (t, 'direct')))}); "
                f"target ≥ 0.95x: **{verdict(r, paired('bulk', (t, 'pgharbor'), (t, 'direct')), 0.95)}**{bouncer}")
    if has("connect", "tcp-tls-ecdsa", "pgharbor") and has("connect", "tcp-tls-rsa", "pgbouncer"):
        checks.append(
            "- (for reference) TLS connect, pgharbor with the ECDSA certificate / PgBouncer with the "
            "RSA-2048 one: " + fmt_ratio(med("connect", "tcp-tls-ecdsa", "pgharbor"),
                                         med("connect", "tcp-tls-rsa", "pgbouncer")))
    if "pgharbor-notls" in targets:
        for w in workloads:
            if not has(w, "unix", "pgharbor-notls"):
                continue
            r = ratio_of(w, "unix", "pgharbor", "pgharbor-notls")
            line = (f"- Unix socket, {w}: pgharbor with [tls] (socketsslmode=disable) / pgharbor without "
                    f"[tls] = {fmt_ratio(med(w, 'unix', 'pgharbor'), med(w, 'unix', 'pgharbor-notls'))} "
                    f"(paired {fmt_pair(paired(w, ('unix', 'pgharbor'), ('unix', 'pgharbor-notls')))})")
            if w == "connect":
                cpu_a = med(w, "unix", "pgharbor", "pooler_us_per_tx")
                cpu_b = med(w, "unix", "pgharbor-notls", "pooler_us_per_tx")
                if cpu_a is not None and cpu_b is not None:
                    line += f"; pooler CPU per login {cpu_a:.0f} µs vs {cpu_b:.0f} µs"
                line += (f"; \"pays nothing for TLS\", read as ≥ 0.95x (this machine's run-to-run "
                         f"noise), on tps: **{verdict(r, paired(w, ('unix', 'pgharbor'), ('unix', 'pgharbor-notls')), 0.95)}**")
            checks.append(line)
    elif "unix" in transports and any(r["target"] == "pgharbor" and r["transport"] == "unix"
                                      and r["status"] == "ok" for r in rows):
        checks.append("- Unix socket: pgharbor ran with [tls] configured (socketsslmode=disable) in every "
                      "Unix-socket cell; no run without [tls] to compare with (--skip-notls).")
    if checks:
        out.append("### Issue 3's targets\n")
        out.extend(checks)
        out.append("")

    # -- issue 6's targets: against direct PostgreSQL and PgBouncer, same run
    checks6 = []
    for w in ("connect", "connect8", "establish"):
        if w not in workloads or "direct" not in targets:
            continue
        for t in transports:
            if has(w, t, "pgharbor") and has(w, t, "direct"):
                r = ratio_of(w, t, "pgharbor", "direct")
                bar = 1.0 if t.startswith(TLS_PREFIX) else 3.0
                what = "faster than direct" if bar == 1.0 else "several (read: ≥ 3) times direct"
                checks6.append(f"- {w}, {TRANSPORTS.get(t, t)}: pgharbor / PostgreSQL = {fmt_ratio(med(w, t, 'pgharbor'), med(w, t, 'direct'))} "
                               f"(paired {fmt_pair(paired(w, (t, 'pgharbor'), (t, 'direct')))}); {what}: "
                               f"**{verdict(r, paired(w, (t, 'pgharbor'), (t, 'direct')), bar)}**")
    for w in BULK:
        if w not in workloads or "direct" not in targets:
            continue
        for t in transports:
            if has(w, t, "pgharbor") and has(w, t, "direct"):
                r = ratio_of(w, t, "pgharbor", "direct")
                checks6.append(f"- {w}, {TRANSPORTS.get(t, t)}: pgharbor / PostgreSQL = {fmt_ratio(med(w, t, 'pgharbor'), med(w, t, 'direct'))} "
                               f"(paired {fmt_pair(paired(w, (t, 'pgharbor'), (t, 'direct')))}); ≥ 0.90x: "
                               f"**{verdict(r, paired(w, (t, 'pgharbor'), (t, 'direct')), 0.9)}**")
    if "pgbouncer" in targets and "pgharbor" in targets:
        below = []
        n = 0
        for w in workloads:
            for t in transports:
                r = ratio_of(w, t, "pgharbor", "pgbouncer")
                if r is None:
                    continue
                n += 1
                if r < 1.0:
                    below.append(f"{w}/{TRANSPORTS.get(t, t)} {r:.2f}x "
                                 f"(paired {fmt_pair(paired(w, (t, 'pgharbor'), (t, 'pgbouncer')))})")
        checks6.append(f"- pgharbor at or above PgBouncer (ratio of medians ≥ 1.00x): {n - len(below)} of {n} cells"
                       + (("; below: " + "; ".join(below)) if below else ""))
    if checks6:
        out.append("### Issue 6's targets (same run)\n")
        out.extend(checks6)
        out.append("")

    # Machine load: the machine is shared, so say how busy it was.
    loads = [num(r["load1_before"]) for r in rows if num(r["load1_before"]) is not None]
    others = [num(r["other_cpus"]) for r in rows if num(r["other_cpus"]) is not None]
    flagged = [r for r in rows if r["flags"]]
    failed = [r for r in rows if r["status"] != "ok"]
    out.append("### Runs and machine load\n")
    out.append(f"- {len(rows)} runs, {len(failed)} not ok, "
               f"{sum(int(num(r['failed_tx']) or 0) for r in rows if r['workload'] not in BULK)} "
               f"failed pgbench transactions, "
               f"{sum(int(num(r['failed_tx']) or 0) for r in rows if r['workload'] == 'bulk')} "
               f"incomplete COPYs in all.")
    if loads:
        out.append(f"- 1-minute load before each run: median {median(loads):.2f}, max {max(loads):.2f} "
                   "(it includes this benchmark's own previous run, so it is high after every "
                   "persistent run).")
    if others:
        out.append(f"- CPU used by other processes during the runs (machine busy time minus "
                   f"PostgreSQL, poolers and pgbench/psql), in CPUs of {rows[0].get('ncpu', '?')}: "
                   f"median {median(others):.2f}, max {max(others):.2f}.")
    if len(flagged) > 6:
        reasons = defaultdict(int)
        for r in flagged:
            for reason in r["flags"].split("; "):
                reasons[reason] += 1
        out.append(f"- {len(flagged)} of {len(rows)} runs flagged: "
                   + ", ".join(f"{n} × {reason}" for reason, n in sorted(reasons.items()))
                   + " (per run: flags column of raw.csv).")
    elif flagged:
        out.append(f"- {len(flagged)} run(s) flagged:")
        for r in flagged:
            out.append(f"  - round {r['round']} {r['workload']}/{r['transport']}/{r['target']}: "
                       f"{r['flags']} ({unit(r['workload'])} {value(r)}, load1 {r['load1_before']}, "
                       f"other CPUs {r['other_cpus']})")
    for r in failed:
        out.append(f"- NOT OK: round {r['round']} {r['workload']}/{r['transport']}/{r['target']}: "
                   f"{r['status']}")
    print("\n".join(out))


def main(argv):
    if len(argv) == 3 and argv[0] == "scram-secret":
        print(scram_secret(argv[1], int(argv[2])))
    elif len(argv) == 2 and argv[0] == "free-port":
        print(free_port(int(argv[1])))
    elif len(argv) in (3, 4) and argv[0] == "export":
        export(*argv[1:])
    elif len(argv) in (2, 3) and argv[0] == "summarize":
        summarize(*argv[1:])
    elif len(argv) == 3 and argv[0] == "conninfo-shell":
        try:
            print(conninfo_shell(argv[1], argv[2]))
        except ValueError as e:
            sys.stderr.write(f"connection string: {e}\n")
            return 1
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
