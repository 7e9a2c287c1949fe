"""The bars the issues set, checked on this run's figures, and the two
comparisons with their own tables: pgharbor against its baseline build
(--baseline-bin, the 0.98x refactor bar) and memory per idle client.

A bar is MET or NOT MET only when the ratio of the medians and the median
of the paired per-round ratios agree (`stats.verdict`); a figure the runs do
not settle says so instead of picking a side.
"""

from collections import defaultdict

from .model import BASE, BASE_BAR, BULK, SHORT, TARGETS, TLS_PREFIX, TRANSPORTS, num, persistent_clients
from .stats import (cpu_field, fmt_pair, fmt_ratio, fmt_tps, median, ordered, ratio, subject,
                    target_labels, unit, verdict, workload_short)

IDLE_TRANSPORTS = {"unix": "Unix socket", "tcp": "TCP plain", "tcp-tls": "TCP + TLS"}


def not_measured(rows, target, keep=lambda r: True):
    """The line for a target none of whose (kept) runs succeeded, or None."""
    mine = [r for r in rows if r["target"] == target and keep(r)]
    if mine and not any(r["status"] == "ok" for r in mine):
        return f"- not measured: no {target} run succeeded (first: {mine[0]['status']})"
    return None


def baseline_row(v, w, t):
    """One cell of the baseline table: (line, verdict, ratio of medians)."""
    field = cpu_field(w)
    fmt = "{:.2f} s/GB" if w in BULK else "{:.1f} µs"
    a, b = v.med(w, t, "pgharbor"), v.med(w, t, BASE)
    ca, cb = v.med(w, t, "pgharbor", field), v.med(w, t, BASE, field)
    p = v.paired(w, (t, "pgharbor"), (t, BASE))
    pc = v.paired(w, (t, "pgharbor"), (t, BASE), field)
    verd = verdict(ratio(a, b), p, BASE_BAR)
    line = (f"| {w} | {TRANSPORTS.get(t, t)} | {fmt_tps(a)} {unit(w)} | {fmt_tps(b)} {unit(w)} "
            f"| {fmt_ratio(a, b)} | {fmt_pair(p)} | {'–' if ca is None else fmt.format(ca)} "
            f"| {'–' if cb is None else fmt.format(cb)} | {fmt_ratio(ca, cb)} | {fmt_pair(pc)} | **{verd}** |")
    return line, verd, ratio(a, b)


def baseline_table(v):
    """pgharbor / pgharbor-base (--baseline-bin: another build, same config, run
    next to pgharbor in each cell, the order reversed every other round) for
    every cell both ran: throughput and pooler CPU, with the refactor bar
    (>= BASE_BAR on throughput)."""
    if "pgharbor" not in v.targets or BASE not in v.targets:
        return []
    out = [f"### pgharbor / {BASE}: the build under test over the baseline build (--baseline-bin), same run\n"]
    failed = not_measured(v.rows, BASE)
    if failed:
        return out + [failed, ""]
    out.append(f"| workload | transport | pgharbor | {BASE} | ratio | paired per round | pooler CPU, pgharbor "
               f"| pooler CPU, {BASE} | CPU ratio | CPU ratio, paired | ≥ {BASE_BAR:.2f}x |")
    out.append("| --- | --- |" + " ---: |" * 8 + " --- |")
    below, n = [], 0
    for w in v.workloads:
        for t in v.transports:
            if not (v.has(w, t, "pgharbor") and v.has(w, t, BASE)):
                continue
            line, verd, r = baseline_row(v, w, t)
            if r is not None:
                n += 1
                if not verd.startswith("MET"):
                    below.append(f"{w}/{TRANSPORTS.get(t, t)} {r:.2f}x")
            out.append(line)
    out.append("")
    out.append(f"- pgharbor at or above {BASE_BAR:.2f}x {BASE} on throughput: {n - len(below)} of {n} cells"
               + (("; not: " + "; ".join(below)) if below else ""))
    out.append("- (ratio: of the medians; paired: median (range) of the per-round ratios of the two runs "
               "made back to back; CPU ratio below 1.00x = the build under test uses less pooler CPU "
               "per transaction / per GB.)")
    out.append("")
    return out


def issue4_line(v, w, t):
    a, b = v.med(w, t, "pgharbor"), v.med(w, t, "pgbouncer")
    p = v.paired(w, (t, "pgharbor"), (t, "pgbouncer"))
    line = (f"- {workload_short(w)}, {TRANSPORTS.get(t, t)}: pgharbor / PgBouncer tps = "
            f"{fmt_ratio(a, b)}; ≥ 1.2x: **{verdict(ratio(a, b), p, 1.2)}**")
    ca, cb = v.med(w, t, "pgharbor", "pooler_us_per_tx"), v.med(w, t, "pgbouncer", "pooler_us_per_tx")
    if ca is not None and cb is not None:
        line += (f"; CPU per transaction {ca:.1f} vs {cb:.1f} µs, no more than PgBouncer's: "
                 f"**{'MET' if ca <= cb else 'NOT MET'}**")
    if a is None:
        why = next((r["status"] for r in v.runs(w, t, "pgharbor") if r["status"] != "ok"), "")
        line += f" (pgharbor: {why})" if why else ""
    return line


def issue4_checks(v):
    """Issue 4's bar in transaction mode: pgharbor's tps >= 1.2x PgBouncer's with no
    more CPU per transaction, per persistent cell."""
    mode = {r["target"]: r.get("pool_mode") for r in v.rows if r.get("pool_mode")}
    if mode.get("pgharbor") != "transaction" or "pgbouncer" not in mode:
        return []
    failed = not_measured(v.rows, "pgharbor", lambda r: persistent_clients(r["workload"]))
    if failed:
        return [failed]
    return [issue4_line(v, w, t) for w in v.workloads if persistent_clients(w) for t in v.transports
            if v.has(w, t, "pgharbor") and v.has(w, t, "pgbouncer")]


def issue3_tls_lines(v, t):
    """TLS connect against PgBouncer (≥ 1.3x) and TLS bulk against direct (≥ 0.95x)."""
    cert, out = t[len(TLS_PREFIX):].upper(), []
    if "connect" in v.workloads and "pgbouncer" in v.targets and "pgharbor" in v.targets:
        p = v.paired("connect", (t, "pgharbor"), (t, "pgbouncer"))
        cpu_a = v.med("connect", t, "pgharbor", "pooler_us_per_tx")
        cpu_b = v.med("connect", t, "pgbouncer", "pooler_us_per_tx")
        cpu = (f"; pooler CPU per TLS login {cpu_a:.0f} µs vs {cpu_b:.0f} µs"
               if cpu_a is not None and cpu_b is not None else "")
        out.append(f"- TLS connect per transaction, {cert} certificate on both poolers: pgharbor / PgBouncer "
                   f"= {fmt_ratio(v.med('connect', t, 'pgharbor'), v.med('connect', t, 'pgbouncer'))} "
                   f"(paired {fmt_pair(p)}); "
                   f"target ≥ 1.3x: **{verdict(v.ratio_of('connect', t, 'pgharbor', 'pgbouncer'), p, 1.3)}**{cpu}")
    if "bulk" in v.workloads and "direct" in v.targets and "pgharbor" in v.targets:
        p = v.paired("bulk", (t, "pgharbor"), (t, "direct"))
        bouncer = ""
        if "pgbouncer" in v.targets:
            bouncer = (f"; PgBouncer / PostgreSQL = "
                       f"{fmt_ratio(v.med('bulk', t, 'pgbouncer'), v.med('bulk', t, 'direct'))}")
        out.append(f"- TLS bulk, {cert} certificate: pgharbor / PostgreSQL direct = "
                   f"{fmt_ratio(v.med('bulk', t, 'pgharbor'), v.med('bulk', t, 'direct'))} "
                   f"(paired {fmt_pair(p)}); "
                   f"target ≥ 0.95x: **{verdict(v.ratio_of('bulk', t, 'pgharbor', 'direct'), p, 0.95)}**{bouncer}")
    return out


def issue3_notls_line(v, w):
    """pgharbor with [tls] over pgharbor without, on the socket: TLS configured costs nothing there."""
    p = v.paired(w, ("unix", "pgharbor"), ("unix", "pgharbor-notls"))
    line = (f"- Unix socket, {w}: pgharbor with [tls] (socketsslmode=disable) / pgharbor without "
            f"[tls] = {fmt_ratio(v.med(w, 'unix', 'pgharbor'), v.med(w, 'unix', 'pgharbor-notls'))} "
            f"(paired {fmt_pair(p)})")
    if w == "connect":
        cpu_a = v.med(w, "unix", "pgharbor", "pooler_us_per_tx")
        cpu_b = v.med(w, "unix", "pgharbor-notls", "pooler_us_per_tx")
        if cpu_a is not None and cpu_b is not None:
            line += f"; pooler CPU per login {cpu_a:.0f} µs vs {cpu_b:.0f} µs"
        line += (f"; \"pays nothing for TLS\", read as ≥ 0.95x (this machine's run-to-run "
                 f"noise), on tps: **{verdict(v.ratio_of(w, 'unix', 'pgharbor', 'pgharbor-notls'), p, 0.95)}**")
    return line


def issue3_checks(v):
    out = []
    for t in v.tls_transports:
        out.extend(issue3_tls_lines(v, t))
    if v.has("connect", "tcp-tls-ecdsa", "pgharbor") and v.has("connect", "tcp-tls-rsa", "pgbouncer"):
        out.append("- (for reference) TLS connect, pgharbor with the ECDSA certificate / PgBouncer with the "
                   "RSA-2048 one: " + fmt_ratio(v.med("connect", "tcp-tls-ecdsa", "pgharbor"),
                                                v.med("connect", "tcp-tls-rsa", "pgbouncer")))
    if "pgharbor-notls" in v.targets:
        out.extend(issue3_notls_line(v, w) for w in v.workloads if v.has(w, "unix", "pgharbor-notls"))
    elif "unix" in v.transports and any(r["target"] == "pgharbor" and r["transport"] == "unix"
                                        and r["status"] == "ok" for r in v.rows):
        out.append("- Unix socket: pgharbor ran with [tls] configured (socketsslmode=disable) in every "
                   "Unix-socket cell; no run without [tls] to compare with (--skip-notls).")
    return out


def issue6_direct_line(v, w, t, bar, what):
    p = v.paired(w, (t, "pgharbor"), (t, "direct"))
    return (f"- {w}, {TRANSPORTS.get(t, t)}: pgharbor / PostgreSQL = "
            f"{fmt_ratio(v.med(w, t, 'pgharbor'), v.med(w, t, 'direct'))} "
            f"(paired {fmt_pair(p)}); {what}: **{verdict(v.ratio_of(w, t, 'pgharbor', 'direct'), p, bar)}**")


def issue6_bouncer_line(v):
    """How many cells pgharbor's median is at or above PgBouncer's, and which are not."""
    below, n = [], 0
    for w in v.workloads:
        for t in v.transports:
            r = v.ratio_of(w, t, "pgharbor", "pgbouncer")
            if r is None:
                continue
            n += 1
            if r < 1.0:
                below.append(f"{w}/{TRANSPORTS.get(t, t)} {r:.2f}x "
                             f"(paired {fmt_pair(v.paired(w, (t, 'pgharbor'), (t, 'pgbouncer')))})")
    return (f"- pgharbor at or above PgBouncer (ratio of medians ≥ 1.00x): {n - len(below)} of {n} cells"
            + (("; below: " + "; ".join(below)) if below else ""))


def issue6_checks(v):
    """Issue 6's targets: against direct PostgreSQL and PgBouncer, same run."""
    out = []
    both = [(w, t) for w in v.workloads for t in v.transports
            if "direct" in v.targets and v.has(w, t, "pgharbor") and v.has(w, t, "direct")]
    for w in ("connect", "connect8", "establish"):
        for t in (t for x, t in both if x == w):
            tls = t.startswith(TLS_PREFIX)
            out.append(issue6_direct_line(v, w, t, 1.0 if tls else 3.0,
                                          "faster than direct" if tls else "several (read: ≥ 3) times direct"))
    for w in BULK:
        out.extend(issue6_direct_line(v, w, t, 0.9, "≥ 0.90x") for x, t in both if x == w)
    if "pgbouncer" in v.targets and "pgharbor" in v.targets:
        out.append(issue6_bouncer_line(v))
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
           "per transport, one transport at a time)\n",
           "| pooler | " + " | ".join(IDLE_TRANSPORTS.get(t, t) for t in transports) + " | logged in |",
           "| --- |" + " ---: |" * len(transports) + " --- |"]
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
            notes += [f"- {labels[g]}, {IDLE_TRANSPORTS.get(t, t)}: {r['failed']} of {r['clients']} "
                      f"logins failed, first: {r['error']}" for r in rs if r.get("error")]
        out.append(f"| {labels[g]} | " + " | ".join(cells) + " | " + "; ".join(counts) + " |")
    subj = subject(targets)
    for other in (["pgbouncer"] if subj and "pgbouncer" in targets else []) + \
            ([BASE] if subj == "pgharbor" and BASE in targets else []):
        name = "PgBouncer" if other == "pgbouncer" else BASE
        out.append(f"| {SHORT[subj]} / {name} | " + " | ".join(
            fmt_ratio(kib(subj, t), kib(other, t)) for t in transports) + " | |")
    out.append("")
    out.extend(notes)
    if subj == "pgharbor" and "pgbouncer" in targets:
        for t in transports:
            a, b = kib("pgharbor", t), kib("pgbouncer", t)
            if a is not None and b is not None:
                ok = b > 0 and a <= 2 * b
                out.append(f"- Issue 4: memory per idle client within 2x PgBouncer's, "
                           f"{IDLE_TRANSPORTS.get(t, t)}: {a:.2f} vs {b:.2f} KiB: **{'MET' if ok else 'NOT MET'}**")
    out.append("")
    return out
