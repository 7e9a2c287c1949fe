#!/usr/bin/env python3
"""Helpers for pgbench/run (Python 3.11, standard library only).

  bench.py scram-secret PASSWORD ITERATIONS
      Print a PostgreSQL SCRAM-SHA-256 secret for PASSWORD with a fresh random
      salt: SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey> (RFC 5802/7677),
      the form `ALTER ROLE ... PASSWORD '<secret>'` stores as is. PostgreSQL 15
      cannot lower the iteration count itself, hence this.

  bench.py free-port START
      Print the first TCP port >= START that can be bound on 127.0.0.1.

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
WORKLOADS = {"connect": "Connect per transaction", "persistent": "Persistent",
             "bulk": "Bulk COPY out"}
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
    return "MB/s" if workload == "bulk" else "tps"


def value(r):
    """The run's throughput: MB/s for bulk runs, tps otherwise."""
    return num(r.get("mb_per_s")) if r["workload"] == "bulk" else num(r["tps"])


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
                  ("persistent", "pooler_us_per_tx", "Pooler CPU per transaction (persistent), µs"),
                  ("bulk", "pooler_s_per_gb", "Pooler CPU per GB of COPY text (bulk), CPU seconds")]
    for w, field, title in cpu_tables:
        if w not in workloads or not poolers:
            continue
        cols = [t for t in transports if any(has(w, t, g) for g in poolers)]
        out.append(f"### {title} (median; utime+stime from /proc/PID/stat)\n")
        out.append("| pooler | " + " | ".join(TRANSPORTS.get(t, t) for t in cols) + " |")
        out.append("| --- |" + " ---: |" * len(cols))
        fmt = (lambda m: f"{m:.2f}") if w == "bulk" else (lambda m: f"{m:.1f}")  # noqa: E731
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

    # Machine load: the machine is shared, so say how busy it was.
    loads = [num(r["load1_before"]) for r in rows]
    others = [num(r["other_cpus"]) for r in rows if num(r["other_cpus"]) is not None]
    flagged = [r for r in rows if r["flags"]]
    failed = [r for r in rows if r["status"] != "ok"]
    out.append("### Runs and machine load\n")
    out.append(f"- {len(rows)} runs, {len(failed)} not ok, "
               f"{sum(int(num(r['failed_tx']) or 0) for r in rows if r['workload'] != 'bulk')} "
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
    elif len(argv) == 2 and argv[0] == "summarize":
        summarize(argv[1])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
