"""summary.md's tables, one function per table, from raw.csv's rows.

Each function takes the `View` of the run (the rows grouped by cell, the
workloads, transports and targets in display order) and returns its lines;
`summary_text` puts them in the order the README describes. The issue bars
and the baseline comparison live in checks.py.
"""

from collections import defaultdict

from .checks import baseline_table, idle_table, issue3_checks, issue4_checks, issue6_checks
from .model import (BASE, cert_cell, BULK, LOGINS, POOLERS, SHORT, TARGETS, TLS_PREFIX, TRANSPORTS, num,
                    persistent_clients)
from .stats import (Cells, cpu_field, fmt_pair, fmt_ratio, fmt_tps, median, ordered, spread, subject,
                    target_labels, unit, value, workload_order, workload_short, workload_title)


class View(Cells):
    """The rows of one run as the tables see them."""

    def __init__(self, rows):
        super().__init__(rows)
        self.workloads = workload_order([r["workload"] for r in rows])
        self.transports = ordered([r["transport"] for r in rows], TRANSPORTS)
        # Per server certificate (TLS over plain, ECDSA vs RSA); not the login cells of tlsauth.py.
        self.tls_transports = [t for t in self.transports if cert_cell(t)]
        self.targets = ordered([r["target"] for r in rows], TARGETS)
        self.labels = target_labels(rows)
        self.subj = subject(self.targets)
        self.rounds = len({r["round"] for r in rows})

    def cols(self, w, targets=None):
        """The transports in which any of TARGETS (default: all) ran W."""
        return [t for t in self.transports if any(self.has(w, t, g) for g in targets or self.targets)]


def cell_text(runs):
    """A throughput cell: median, (±half the range), [n failed]."""
    ok = [value(r) for r in runs if r["status"] == "ok"]
    m, s = median(ok), spread(ok)
    text = fmt_tps(m)
    if s is not None:
        text += f" (±{s / 2:.0f}%)"
    if len(runs) > len(ok):
        text += f" [{len(runs) - len(ok)} failed]"
    return text


def throughput_table(v, w):
    """One workload: a row per target, a column per transport, the ratio rows."""
    example = next(r for r in v.rows if r["workload"] == w)
    cols = v.cols(w)
    out = [f"### {workload_title(w)} (`{example['command']}`), {unit(w)}, median of {v.rounds} round(s)\n",
           "| target | " + " | ".join(TRANSPORTS.get(t, t) for t in cols) + " |",
           "| --- |" + " ---: |" * len(cols)]
    for g in v.targets:
        if any(v.has(w, t, g) for t in cols):
            out.append(f"| {v.labels[g]} | "
                       + " | ".join(cell_text(v.runs(w, t, g)) if v.has(w, t, g) else "" for t in cols) + " |")
    subj = v.subj
    pairs = [(subj, "direct"), (subj, "pgbouncer"), ("pgbouncer", "direct"), ("haproxy", "pgbouncer")]
    if subj == "pgharbor":
        pairs.insert(2, (subj, BASE))
    for a, b in pairs:
        if not any(v.has(w, t, a) for t in cols) or not any(v.has(w, t, b) for t in cols):
            continue
        out.append(f"| {SHORT[a]} / {SHORT[b]} | "
                   + " | ".join(fmt_ratio(v.med(w, t, a), v.med(w, t, b)) for t in cols) + " |")
        if a == subj:
            out.append(f"| {SHORT[a]} / {SHORT[b]}, paired per round | "
                       + " | ".join(fmt_pair(v.paired(w, (t, a), (t, b))) for t in cols) + " |")
    out.append("")
    return out


def throughput_tables(v):
    out = []
    for w in v.workloads:
        out.extend(throughput_table(v, w))
    out.append("(±x% = half the range of the runs, relative to the median. Ratios: of the medians;"
               " \"paired per round\": median, and range, of the ratios of runs made back to back"
               " in the same round, which cancels slow drift in the machine's load.)\n")
    return out


def tls_table(v):
    """What TLS costs each target: TLS cell / TCP plain cell, same target, same round."""
    if not v.tls_transports or "tcp" not in v.transports:
        return []
    cols = [(w, t) for w in v.workloads for t in v.tls_transports]
    out = ["### TLS / plain: TCP + TLS over TCP plain, per target (paired per round: median (range))\n",
           "| target | " + " | ".join(f"{w} {unit(w)}, {t[len(TLS_PREFIX):].upper()}" for w, t in cols) + " |",
           "| --- |" + " ---: |" * len(cols)]
    for g in v.targets:
        if any(v.has(w, t, g) for w, t in cols):
            out.append(f"| {v.labels[g]} | "
                       + " | ".join(fmt_pair(v.paired(w, (t, g), ("tcp", g))) for w, t in cols) + " |")
    out.append("")
    return out


def cpu_title(w):
    if w == "bulk":
        return "Pooler CPU per GB of COPY text (bulk), CPU seconds"
    if w == "bulkselect":
        return "Pooler CPU per GB of result text (bulk SELECT), CPU seconds"
    what = "login" if w in LOGINS else "transaction"
    return f"Pooler CPU per {what} ({workload_title(w)}), µs"


def cpu_table(v, w, poolers):
    """One workload's pooler CPU per login / transaction / GB, with the ratios."""
    field = cpu_field(w)
    cols = v.cols(w, poolers)
    out = [f"### {cpu_title(w)} (median; utime+stime from /proc/PID/stat)\n",
           "| pooler | " + " | ".join(TRANSPORTS.get(t, t) for t in cols) + " |",
           "| --- |" + " ---: |" * len(cols)]
    fmt = "{:.2f}" if w in BULK else "{:.1f}"
    for g in poolers:
        if not any(v.has(w, t, g) for t in cols):
            continue
        vals = []
        for t in cols:
            m = v.med(w, t, g, field)
            vals.append("" if not v.has(w, t, g) else "–" if m is None else fmt.format(m))
        out.append(f"| {v.labels[g]} | " + " | ".join(vals) + " |")
    subj = v.subj
    if subj in poolers and "pgbouncer" in poolers:
        out.append(f"| {SHORT[subj]} / PgBouncer | " + " | ".join(
            fmt_ratio(v.med(w, t, subj, field), v.med(w, t, "pgbouncer", field)) for t in cols) + " |")
    if subj == "pgharbor" and BASE in poolers:
        out.append(f"| pgharbor / {BASE} | " + " | ".join(
            fmt_ratio(v.med(w, t, subj, field), v.med(w, t, BASE, field)) for t in cols) + " |")
    out.append("")
    return out


def cpu_tables(v):
    poolers = [g for g in POOLERS if g in v.targets]
    out = []
    for w in v.workloads if poolers else []:
        out.extend(cpu_table(v, w, poolers))
    return out


def glance_cell(v, w, t, g):
    """"tps, latency, µs" of one target in one persistent cell."""
    if not v.has(w, t, g):
        return ""
    tps, lat = v.med(w, t, g), v.med(w, t, g, "latency_ms")
    if tps is None:
        return "failed"
    text = f"{fmt_tps(tps)} tps"
    if lat is not None:
        text += f", {lat:.2f} ms"
    cpu = v.med(w, t, g, "pooler_us_per_tx") if g in POOLERS else None
    if cpu is not None:
        text += f", {cpu:.1f} µs"
    return text


def glance_table(v):
    """The persistent workloads in one table: per cell and target the median tps,
    latency and pooler CPU per transaction, and the subject's ratios to PgBouncer."""
    workloads = [w for w in v.workloads if persistent_clients(w)]
    if not workloads:
        return []
    targets = [g for g in v.targets if g != "pgharbor-notls"]
    subj = subject(targets)
    others = ([("pgbouncer", "PgBouncer")] if subj and "pgbouncer" in targets else []) + \
        ([(BASE, BASE)] if subj == "pgharbor" and BASE in targets else [])
    head = "| workload | transport | " + " | ".join(v.labels[g] for g in targets)
    for _, name in others:
        head += f" | {SHORT[subj]} / {name} tps | {SHORT[subj]} / {name} CPU per tx"
    out = ["### Persistent workloads at a glance: median tps, latency, pooler CPU per transaction\n",
           head + " |", "| --- | --- |" + " ---: |" * (len(targets) + 2 * len(others))]
    cpu = "pooler_us_per_tx"
    for w in workloads:
        for t in v.transports:
            if not any(v.has(w, t, g) for g in targets):
                continue
            line = f"| {workload_short(w)} | {TRANSPORTS.get(t, t)} | " + " | ".join(
                glance_cell(v, w, t, g) for g in targets)
            for other, _ in others:
                line += (f" | {fmt_ratio(v.med(w, t, subj), v.med(w, t, other))}"
                         f" | {fmt_ratio(v.med(w, t, subj, cpu), v.med(w, t, other, cpu))}")
            out.append(line + " |")
    out.append("")
    out.append("(tps and pgbench's average latency; µs = the pooler's CPU time (utime+stime) per "
               "transaction. Direct PostgreSQL has one server process per client; the poolers share "
               "their pool among the clients.)\n")
    return out


def flagged_lines(rows, flagged):
    """The flagged runs: counted by reason when many, else one line each."""
    if len(flagged) > 6:
        reasons = defaultdict(int)
        for r in flagged:
            for reason in r["flags"].split("; "):
                reasons[reason] += 1
        return [f"- {len(flagged)} of {len(rows)} runs flagged: "
                + ", ".join(f"{n} × {reason}" for reason, n in sorted(reasons.items()))
                + " (per run: flags column of raw.csv)."]
    out = [f"- {len(flagged)} run(s) flagged:"] if flagged else []
    for r in flagged:
        out.append(f"  - round {r['round']} {r['workload']}/{r['transport']}/{r['target']}: "
                   f"{r['flags']} ({unit(r['workload'])} {value(r)}, load1 {r['load1_before']}, "
                   f"other CPUs {r['other_cpus']})")
    return out


def load_section(v):
    """Machine load: the machine is shared, so say how busy it was."""
    rows = v.rows
    loads = [num(r["load1_before"]) for r in rows if num(r["load1_before"]) is not None]
    others = [num(r["other_cpus"]) for r in rows if num(r["other_cpus"]) is not None]
    failed = [r for r in rows if r["status"] != "ok"]
    out = ["### Runs and machine load\n",
           f"- {len(rows)} runs, {len(failed)} not ok, "
           f"{sum(int(num(r['failed_tx']) or 0) for r in rows if r['workload'] not in BULK)} "
           f"failed pgbench transactions, "
           f"{sum(int(num(r['failed_tx']) or 0) for r in rows if r['workload'] == 'bulk')} "
           f"incomplete COPYs in all."]
    if loads:
        out.append(f"- 1-minute load before each run: median {median(loads):.2f}, max {max(loads):.2f} "
                   "(it includes this benchmark's own previous run, so it is high after every "
                   "persistent run).")
    if others:
        out.append(f"- CPU used by other processes during the runs (machine busy time minus "
                   f"PostgreSQL, poolers and pgbench/psql), in CPUs of {rows[0].get('ncpu', '?')}: "
                   f"median {median(others):.2f}, max {max(others):.2f}.")
    out.extend(flagged_lines(rows, [r for r in rows if r["flags"]]))
    for r in failed:
        out.append(f"- NOT OK: round {r['round']} {r['workload']}/{r['transport']}/{r['target']}: "
                   f"{r['status']}")
    return out


def section(title, lines):
    return [title, *lines, ""] if lines else []


def summary_text(rows, idle_rows=None):
    """The Markdown tables of one run (the part of summary.md after the header)."""
    if not rows:
        raise ValueError("no runs")
    v = View(rows)
    out = throughput_tables(v) + tls_table(v) + cpu_tables(v) + glance_table(v) + baseline_table(v)
    if idle_rows is not None:
        out += idle_table(idle_rows)
    out += section("### Issue 4's targets (transaction pooling, same run)\n", issue4_checks(v))
    out += section("### Issue 3's targets\n", issue3_checks(v))
    out += section("### Issue 6's targets (same run)\n", issue6_checks(v))
    out += load_section(v)
    return "\n".join(out)
