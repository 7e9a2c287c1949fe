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
      median tps per (workload, transport, target), ratios of pgharbor to
      direct PostgreSQL and to PgBouncer, pooler CPU per transaction, and the
      machine-load notes.
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
           "pgbouncer": "PgBouncer session"}
TRANSPORTS = {"unix": "Unix socket", "tcp": "TCP plain", "tls": "TCP + TLS"}
WORKLOADS = {"connect": "Connect per transaction", "persistent": "Persistent"}
POOLERS = ("pgharbor", "pgbouncer")


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


def fmt_paired(cells, workload, transport, other):
    """Median (min-max) over rounds of pgharbor's tps / other's tps in the same round."""
    by_round = lambda g: {r["round"]: num(r["tps"])  # noqa: E731
                          for r in cells.get((workload, transport, g), []) if r["status"] == "ok"}
    a, b = by_round("pgharbor"), by_round(other)
    ratios = sorted(a[k] / b[k] for k in a.keys() & b.keys() if a[k] and b[k])
    if not ratios:
        return "–"
    text = f"{statistics.median(ratios):.2f}x"
    if len(ratios) > 1:
        text += f" ({ratios[0]:.2f}–{ratios[-1]:.2f})"
    return text


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
    targets = ordered([r["target"] for r in rows], TARGETS)
    rounds = len({r["round"] for r in rows})
    out = []

    def tps_median(w, t, g):
        return median([num(r["tps"]) for r in cells.get((w, t, g), []) if r["status"] == "ok"])

    for w in workloads:
        example = next(r for r in rows if r["workload"] == w)
        out.append(f"### {WORKLOADS.get(w, w)} (`{example['command']}`), tps, "
                   f"median of {rounds} round(s)\n")
        out.append("| target | " + " | ".join(TRANSPORTS.get(t, t) for t in transports) + " |")
        out.append("| --- |" + " ---: |" * len(transports))
        for g in targets:
            line = []
            for t in transports:
                runs = cells.get((w, t, g), [])
                ok = [num(r["tps"]) for r in runs if r["status"] == "ok"]
                m, s = median(ok), spread(ok)
                text = fmt_tps(m)
                if s is not None:
                    text += f" (±{s / 2:.0f}%)"
                bad = len(runs) - len(ok)
                if bad:
                    text += f" [{bad} failed]"
                line.append(text)
            out.append(f"| {TARGETS.get(g, g)} | " + " | ".join(line) + " |")
        if "pgharbor" in targets:
            for other in ("direct", "pgbouncer"):
                if other not in targets:
                    continue
                ratios = [fmt_ratio(tps_median(w, t, "pgharbor"), tps_median(w, t, other))
                          for t in transports]
                out.append(f"| pgharbor / {TARGETS[other].split()[0]} | "
                           + " | ".join(ratios) + " |")
                paired = [fmt_paired(cells, w, t, other) for t in transports]
                out.append(f"| pgharbor / {TARGETS[other].split()[0]}, paired per round | "
                           + " | ".join(paired) + " |")
        out.append("")
    out.append("(±x% = half the range of the runs, relative to the median. Ratios: of the medians;"
               " \"paired per round\": median, and range, of the ratios of runs made back to back"
               " in the same round, which cancels slow drift in the machine's load.)\n")

    poolers = [g for g in POOLERS if g in targets]
    if poolers:
        out.append("### Pooler CPU per transaction, µs (median; utime+stime from /proc/PID/stat)\n")
        cols = [(w, t) for w in workloads for t in transports]
        out.append("| pooler | " + " | ".join(f"{w} / {TRANSPORTS.get(t, t)}" for w, t in cols) + " |")
        out.append("| --- |" + " ---: |" * len(cols))
        for g in poolers:
            vals = []
            for w, t in cols:
                m = median([num(r["pooler_us_per_tx"]) for r in cells.get((w, t, g), [])
                            if r["status"] == "ok"])
                vals.append("–" if m is None else f"{m:.1f}")
            out.append(f"| {TARGETS.get(g, g)} | " + " | ".join(vals) + " |")
        if len(poolers) == 2:
            vals = []
            for w, t in cols:
                a = median([num(r["pooler_us_per_tx"]) for r in cells.get((w, t, "pgharbor"), [])
                             if r["status"] == "ok"])
                b = median([num(r["pooler_us_per_tx"]) for r in cells.get((w, t, "pgbouncer"), [])
                             if r["status"] == "ok"])
                vals.append(fmt_ratio(a, b))
            out.append("| pgharbor / PgBouncer | " + " | ".join(vals) + " |")
        out.append("")

    # Machine load: the machine is shared, so say how busy it was.
    loads = [num(r["load1_before"]) for r in rows]
    others = [num(r["other_cpus"]) for r in rows if num(r["other_cpus"]) is not None]
    flagged = [r for r in rows if r["flags"]]
    failed = [r for r in rows if r["status"] != "ok"]
    out.append("### Runs and machine load\n")
    out.append(f"- {len(rows)} runs, {len(failed)} not ok, "
               f"{sum(int(num(r['failed_tx']) or 0) for r in rows)} failed transactions in all.")
    out.append(f"- 1-minute load before each run: median {median(loads):.2f}, max {max(loads):.2f} "
               "(it includes this benchmark's own previous run, so it is high after every "
               "persistent run).")
    if others:
        out.append(f"- CPU used by other processes during the runs (machine busy time minus "
                   f"PostgreSQL, poolers and pgbench), in CPUs of {rows[0].get('ncpu', '?')}: "
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
                       f"{r['flags']} (tps {r['tps']}, load1 {r['load1_before']}, "
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
