#!/usr/bin/env python3
"""Helpers for pgbench/run (Python 3.11, standard library only).

  bench.py scram-secret PASSWORD ITERATIONS
      Print a PostgreSQL SCRAM-SHA-256 secret for PASSWORD with a fresh random
      salt: SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey> (RFC 5802/7677),
      the form `ALTER ROLE ... PASSWORD '<secret>'` stores as is. PostgreSQL 15
      cannot lower the iteration count itself, hence this.

  bench.py free-port START
      Print the first TCP port >= START that can be bound on 127.0.0.1.

  bench.py export RAW_CSV OUT_DIR
      Write OUT_DIR/results.json (every run, the per-cell medians and the
      ratios: pgharbor / direct, pgharbor / PgBouncer, PgBouncer / direct,
      TLS / plain; each as the ratio of the medians and as paired per-round
      ratios), OUT_DIR/medians.csv, and the gnuplot input for the plots:
      OUT_DIR/plots/<workload>.dat and .gp (tps or MB/s by transport x TLS,
      one bar per target), rendered by `gnuplot <workload>.gp` to an SVG.

  bench.py summarize RAW_CSV
      Print the Markdown summary of the per-run CSV written by pgbench/run:
      median tps (MB/s for bulk) per (workload, transport, target), ratios of
      pgharbor to direct PostgreSQL and to PgBouncer, TLS / plain ratios,
      pooler CPU per login, per transaction and per GB, issue 3's targets
      checked, and the machine-load notes.
"""

import base64
import csv
import hashlib
import hmac
import os
import socket
import statistics
import sys
from collections import defaultdict

# Display names and orders; unknown values are shown as they are, after these.
TARGETS = {"direct": "PostgreSQL direct", "pgharbor": "pgharbor session",
           "pgbouncer": "PgBouncer session", "pgharbor-notls": "pgharbor session, no [tls]"}
SHORT = {"direct": "PostgreSQL", "pgharbor": "pgharbor", "pgbouncer": "PgBouncer",
         "pgharbor-notls": "pgharbor (no [tls])"}
TRANSPORTS = {"unix": "Unix socket", "tcp": "TCP plain",
              "tcp-tls-ecdsa": "TCP + TLS (ECDSA P-256)", "tcp-tls-rsa": "TCP + TLS (RSA-2048)"}
WORKLOADS = {"connect": "Connect per transaction", "connect8": "Connect per transaction, 8 clients",
             "establish": "Establishment only (connect, authenticate, disconnect)",
             "persistent": "Persistent", "persistent64": "Persistent, 64 clients",
             "tpcb": "TPC-B-like", "bulk": "Bulk COPY out", "bulkselect": "Bulk SELECT"}
BULK = ("bulk", "bulkselect")  # measured in MB/s
POOLERS = ("pgharbor", "pgbouncer", "pgharbor-notls")
TLS_PREFIX = "tcp-tls-"


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
               ("pgharbor", "pgharbor-notls"))


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


def ok_values(rows, w, t, g, field=None):
    return [num(r[field]) if field else value(r) for r in rows
            if (r["workload"], r["transport"], r["target"]) == (w, t, g) and r["status"] == "ok"]


def paired_ratios(rows, w, a, b):
    """Per-round ratios of cell a = (transport, target) to cell b in workload w, sorted."""
    def by_round(t, g):
        return {r["round"]: value(r) for r in rows
                if (r["workload"], r["transport"], r["target"]) == (w, t, g) and r["status"] == "ok"}
    x, y = by_round(*a), by_round(*b)
    return sorted(x[k] / y[k] for k in x.keys() & y.keys() if x[k] and y[k])


def cell_medians(rows):
    """One dict per (workload, transport, target) cell, in display order."""
    keys = {(r["workload"], r["transport"], r["target"]) for r in rows}
    out = []
    for w in ordered([k[0] for k in keys], WORKLOADS):
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
    with / without [tls]) per cell, and TLS / plain per target: the ratio of the
    medians and the paired per-round ratios (median, min, max)."""
    med = {(c["workload"], c["transport"], c["target"]): c["median"] for c in cell_medians(rows)}
    out = []

    def add(kind, w, num_cell, den_cell):
        if num_cell not in [(t, g) for (ww, t, g) in med if ww == w] or \
                den_cell not in [(t, g) for (ww, t, g) in med if ww == w]:
            return
        p = paired_ratios(rows, w, num_cell, den_cell)
        out.append({"kind": kind, "workload": w,
                    "numerator": {"transport": num_cell[0], "target": num_cell[1]},
                    "denominator": {"transport": den_cell[0], "target": den_cell[1]},
                    "ratio_of_medians": ratio(med[(w, *num_cell)], med[(w, *den_cell)]),
                    "paired_median": statistics.median(p) if p else None,
                    "paired_min": p[0] if p else None, "paired_max": p[-1] if p else None,
                    "pairs": len(p)})

    for (w, t, g) in med:
        for a, b in RATIO_PAIRS:
            if g == a:
                add(f"{a}/{b}", w, (t, a), (t, b))
        if t.startswith(TLS_PREFIX):
            add("tls/plain", w, (t, g), ("tcp", g))
    return out


def medians_csv(rows, path):
    cols = ["workload", "transport", "target", "unit", "runs", "ok_runs", "median", "spread_pct",
            "latency_ms", "pooler_cpu", "pooler_cpu_unit", "flagged_runs"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for c in cell_medians(rows):
            w.writerow({k: ("" if c[k] is None else c[k]) for k in cols})


def results_json(rows):
    return {"runs": [typed(r) for r in rows], "medians": cell_medians(rows), "ratios": ratios(rows)}


def plot_files(rows, outdir):
    """gnuplot inputs: per workload a .dat (rows: transports; columns: targets;
    '-' = not measured) and a .gp writing <workload>.svg. Returns the .gp files."""
    os.makedirs(outdir, exist_ok=True)
    cells = cell_medians(rows)
    made = []
    for w in ordered({c["workload"] for c in cells}, WORKLOADS):
        cs = [c for c in cells if c["workload"] == w]
        ts = ordered({c["transport"] for c in cs}, TRANSPORTS)
        gs = ordered({c["target"] for c in cs}, TARGETS)
        m = {(c["transport"], c["target"]): c["median"] for c in cs}
        with open(os.path.join(outdir, f"{w}.dat"), "w") as f:
            f.write("transport " + " ".join(f'"{TARGETS.get(g, g)}"' for g in gs) + "\n")
            for t in ts:
                vals = [m.get((t, g)) for g in gs]
                f.write(f'"{TRANSPORTS.get(t, t)}" '
                        + " ".join("-" if v is None else f"{v:.1f}" for v in vals) + "\n")
        gp = os.path.join(outdir, f"{w}.gp")
        with open(gp, "w") as f:
            f.write(f"""set terminal svg size 900,500 dynamic font "sans,12"
set output "{w}.svg"
set title "{WORKLOADS.get(w, w)}: {unit(w)} by transport x TLS (median)"
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


def export(path, outdir):
    import json
    rows = load_rows(path)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(results_json(rows), f, indent=1, ensure_ascii=False)
        f.write("\n")
    medians_csv(rows, os.path.join(outdir, "medians.csv"))
    plot_files(rows, os.path.join(outdir, "plots"))


def summarize(path: str) -> None:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"{path}: no runs")

    cells = defaultdict(list)  # (workload, transport, target) -> rows
    for r in rows:
        cells[(r["workload"], r["transport"], r["target"])].append(r)
    workloads = ordered([r["workload"] for r in rows], WORKLOADS)
    transports = ordered([r["transport"] for r in rows], TRANSPORTS)
    tls_transports = [t for t in transports if t.startswith(TLS_PREFIX)]
    targets = ordered([r["target"] for r in rows], TARGETS)
    rounds = len({r["round"] for r in rows})
    out = []

    def ok_rows(w, t, g):
        return [r for r in cells.get((w, t, g), []) if r["status"] == "ok"]

    def med(w, t, g, field=None):
        return median([num(r[field]) if field else value(r) for r in ok_rows(w, t, g)])

    def by_round(w, t, g):
        return {r["round"]: value(r) for r in ok_rows(w, t, g)}

    def paired(w, a, b):
        """Per-round ratios of cell a = (transport, target) to cell b, sorted."""
        x, y = by_round(w, *a), by_round(w, *b)
        return sorted(x[k] / y[k] for k in x.keys() & y.keys() if x[k] and y[k])

    def fmt_pair(ratios):
        if not ratios:
            return "–"
        text = f"{statistics.median(ratios):.2f}x"
        if len(ratios) > 1:
            text += f" ({ratios[0]:.2f}–{ratios[-1]:.2f})"
        return text

    def has(w, t, g):
        return bool(cells.get((w, t, g)))

    # -- throughput per workload, with pgharbor's ratios
    for w in workloads:
        example = next(r for r in rows if r["workload"] == w)
        cols = [t for t in transports if any(has(w, t, g) for g in targets)]
        out.append(f"### {WORKLOADS.get(w, w)} (`{example['command']}`), {unit(w)}, "
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
            out.append(f"| {TARGETS.get(g, g)} | " + " | ".join(line) + " |")
        pairs = [("pgharbor", "direct"), ("pgharbor", "pgbouncer"), ("pgbouncer", "direct")]
        for a, b in pairs:
            if a not in targets or b not in targets:
                continue
            ratios = [fmt_ratio(med(w, t, a), med(w, t, b)) for t in cols]
            out.append(f"| {SHORT[a]} / {SHORT[b]} | " + " | ".join(ratios) + " |")
            if a == "pgharbor":
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
            out.append(f"| {TARGETS.get(g, g)} | " + " | ".join(
                fmt_pair(paired(w, (t, g), ("tcp", g))) for w, t in cols) + " |")
        out.append("")

    # -- pooler CPU
    poolers = [g for g in POOLERS if g in targets]
    cpu_tables = [("connect", "pooler_us_per_tx", "Pooler CPU per login (connect per transaction), µs"),
                  ("connect8", "pooler_us_per_tx", "Pooler CPU per login (connect per transaction, 8 clients), µs"),
                  ("establish", "pooler_us_per_tx", "Pooler CPU per login (establishment only), µs"),
                  ("persistent", "pooler_us_per_tx", "Pooler CPU per transaction (persistent), µs"),
                  ("persistent64", "pooler_us_per_tx", "Pooler CPU per transaction (persistent, 64 clients), µs"),
                  ("tpcb", "pooler_us_per_tx", "Pooler CPU per transaction (TPC-B-like), µs"),
                  ("bulk", "pooler_s_per_gb", "Pooler CPU per GB of COPY text (bulk), CPU seconds"),
                  ("bulkselect", "pooler_s_per_gb", "Pooler CPU per GB of result text (bulk SELECT), CPU seconds")]
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
            out.append(f"| {TARGETS.get(g, g)} | " + " | ".join(vals) + " |")
        if "pgharbor" in poolers and "pgbouncer" in poolers:
            out.append("| pgharbor / PgBouncer | " + " | ".join(
                fmt_ratio(med(w, t, "pgharbor", field), med(w, t, "pgbouncer", field))
                for t in cols) + " |")
        out.append("")

    # -- issue 3's targets
    checks = []

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

    def ratio_of(w, t, a, b):
        x, y = med(w, t, a), med(w, t, b)
        return x / y if x is not None and y else None

    for t in tls_transports:
        cert = t[len(TLS_PREFIX):].upper()
        if "connect" in workloads and "pgbouncer" in targets:
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
        if "bulk" in workloads and "direct" in targets:
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
    elif "unix" in transports and "pgharbor" in targets:
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
    loads = [num(r["load1_before"]) for r in rows]
    others = [num(r["other_cpus"]) for r in rows if num(r["other_cpus"]) is not None]
    flagged = [r for r in rows if r["flags"]]
    failed = [r for r in rows if r["status"] != "ok"]
    out.append("### Runs and machine load\n")
    out.append(f"- {len(rows)} runs, {len(failed)} not ok, "
               f"{sum(int(num(r['failed_tx']) or 0) for r in rows if r['workload'] not in BULK)} "
               f"failed pgbench transactions, "
               f"{sum(int(num(r['failed_tx']) or 0) for r in rows if r['workload'] == 'bulk')} "
               f"incomplete COPYs in all.")
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
    elif len(argv) == 3 and argv[0] == "export":
        export(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "summarize":
        summarize(argv[1])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
