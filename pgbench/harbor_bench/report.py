"""summary.md: the header that says what ran and how (versions, builds,
authentication, TLS, machine), the tables from raw.csv, excerpts of the
servers' logs, and pgharbor's own SHOW OVERHEAD report; then the other
outputs and the plots.
"""

import glob
import os
import platform
import re
import subprocess

from . import procfs
from .export import export, load_rows
from .summary import summary_text
from .system import CERT_DESC
from .util import say, warn


def target_lines(h):
    s, t = h.s, h.targets
    out = []
    harbor = t.get("pgharbor")
    if harbor and harbor.failed:
        out.append(f"- pgharbor: {h.harbor_version}, {h.harbor_build}: **FAILED, not run** ({s.pool_mode} pooling "
                   f"asked): {harbor.failed}")
    elif s.pooler:
        out.append(f"- pgharbor: not started; the pooler under test (\"pooler\") is {h.pooler_desc}")
    elif "pgharbor" in s.skip:
        out.append("- pgharbor: not run (--skip pgharbor)")
    else:
        out.append(f"- pgharbor: {h.harbor_version}, {h.harbor_build} (binary sha256 {h.harbor_sha}…); {s.pool_mode} "
                   f"pooling, pool size {s.pool_size}, max_client_conn {s.max_client_conn}; [tls] sslmode=prefer, "
                   "socketsslmode=disable")
    if "notls" not in s.skip:
        out.append("- pgharbor (no [tls]): the same binary, a second instance on its own Unix socket, config without [tls]")
    base = t.get("pgharbor-base")
    if base and base.failed:
        out.append(f"- pgharbor-base (--baseline-bin): {h.base_version}, {h.base_build}: **FAILED, not run**: {base.failed}")
    elif base:
        out.append(f"- pgharbor-base (--baseline-bin): {h.base_version}, {h.base_build} (binary sha256 {h.base_sha}…); "
                   f"pgharbor's configuration on its own port {base.port} and socket directory, run next to pgharbor "
                   "in every cell (after it in odd rounds, before it in even ones)")
    return out


def server_lines(h):
    s, d = h.s, h.direct
    pgbench = subprocess.run(["pgbench", "--version"], capture_output=True, text=True).stdout.strip()
    if h.own_pg:
        out = [f"- PostgreSQL {h.pg_version}, throwaway (fsync=off, max_connections={s.max_connections}, ssl=on); "
               f"{pgbench}"]
    else:
        out = [f"- PostgreSQL {h.pg_version}, existing server (--pg: user {h.bench_user}, database {h.bench_db}, "
               f"socket {d.sock or 'none'}, TCP {d.host}:{h.pg_port}; direct transports: {' '.join(d.serves)}); "
               f"{pgbench}"]
    if "direct" in s.skip:
        out.append("- PostgreSQL direct: not run (--skip direct)")
    if "pgbouncer" in h.targets and not h.targets["pgbouncer"].failed:
        out.append(f"- {h.bouncer_version}, {s.pool_mode} pooling, pool size {s.pool_size}, max_client_conn "
                   f"{s.max_client_conn}, connection logging off, client_tls_sslmode=prefer (default TLS "
                   "protocols and ciphers)")
    else:
        out.append("- PgBouncer: not run")
    if "haproxy" in h.targets and not h.targets["haproxy"].failed:
        out.append(f"- {h.haproxy_version}: TCP mode, one thread, no logging, one PostgreSQL connection per "
                   "client over its Unix socket; a relay that parses nothing, run in the persistent cells only, "
                   "as the floor of what a third process in the path costs")
    out.append(f"- {h.auth_desc}")
    out += [f"- note: {n}" for n in h.pg_notes]
    return out


def method_lines(h):
    s, out = h.s, []
    if s.with_tls:
        if h.own_pg:
            kinds = "".join(f"tcp-tls-{c} = {CERT_DESC[c]}; " for c in s.certs)
            out.append(f"- TLS cells: libpq sslmode=require; certificates self-signed, {kinds}all targets serve "
                       "the same one in a cell (switched by pg_reload_conf() / SIGHUP, checked by a TLS handshake after SSLRequest, as libpq makes it)")
        else:
            out.append(f"- TLS cells: libpq sslmode=require; the poolers serve a self-signed {CERT_DESC[h.cur_cert]} "
                       "certificate, PostgreSQL (--pg) its own")
        out += [f"  - {i}" for i in h.tls_info]
    if "bulkselect" in s.workloads:
        out.append(f"- bulkselect: pgbench -t {s.bulk_selects} of `SELECT * FROM pgbench_accounts` "
                   "(pgbench/bulk_select.sql) on one connection; MB/s = pgbench's tps (initial connection "
                   f"excluded) x {h.bulk_bytes} bytes (the result's text, counted as COPY text)")
    if "establish" in s.workloads:
        out.append("- establish: pgbench -C with pgbench/empty.sql, a script of one meta-command (\\set x 1) and "
                   "no SQL: pgbench connects, authenticates and disconnects per transaction and sends no query")
    if "bulk" in s.workloads:
        out.append(f"- bulk: one psql session per run doing {s.bulk_copies} x \\copy ({h.BULK_QUERY}) to "
                   f"'/dev/null'; {h.bulk_rows} rows = {h.bulk_bytes} bytes of COPY text per copy; MB/s = COPY "
                   "text bytes / 10^6 / psql's wall time (login included)")
    with open("/proc/cpuinfo") as f:
        model = procfs.cpu_model(f.read())
    out.append(f"- machine: {h.ncpu} CPUs ({model}), {platform.release()}; load at start: {h.load_at_start}")
    out.append(f"- pgbench -i -s {s.scale}; {s.rounds} round(s) of {s.time}s pgbench runs, targets interleaved "
               "within each cell")
    if s.idle_clients > 0:
        fresh = ", pgharbor and PgBouncer freshly restarted before each batch" if h.idle_fresh else ""
        out.append(f"- memory per idle client: pgbench/idle.py logs in {s.idle_clients} clients over TCP plain, "
                   f"then (after they left) {s.idle_clients} over TCP + TLS (sslmode=require); VmRSS of the "
                   f"pooler before and 1 s after each batch{fresh}")
    return out


def log_report(name, path, pattern):
    """How many lines of a log match PATTERN, and the first 15 of them."""
    if not os.path.isfile(path):
        return []
    with open(path, errors="replace") as f:
        hits = [line.rstrip("\n") for line in f if re.search(pattern, line)]
    out = [f"- {name}: {len(hits)} line(s)" + (", first ones:" if hits else "")]
    if hits:
        out += ["", "```", *hits[:15], "```", ""]
    return out


def log_lines(h):
    # pgharbor's log at level warn: every line but the harness's own "--- ..." markers.
    mine = r"^[^-]|^-[^-]"
    return (log_report("pgharbor log (level warn)", f"{h.tmp}/pgharbor.log", mine)
            + log_report("pgharbor (no [tls]) log (level warn)", f"{h.tmp}/pgharbor-notls.log", mine)
            + log_report("pgharbor-base log (level warn)", f"{h.tmp}/pgharbor-base.log", mine)
            + log_report("PgBouncer log, WARNING/ERROR lines", f"{h.tmp}/pgbouncer.log", "WARNING|ERROR|FATAL")
            + log_report("PostgreSQL log, ERROR/FATAL/PANIC lines", f"{h.pgdir}/postgres.log", "ERROR|FATAL|PANIC"))


def overhead_report(h):
    """pgharbor's own view of the run: SHOW OVERHEAD through `pgharbor report`
    (before the idle clients, whose logins would be counted in it)."""
    path, t = f"{h.out}/overhead.txt", h.targets.get("pgharbor")
    if not t or not t.pid:
        why = t.failed if t and t.failed else "pgharbor was not run"
        with open(path, "w") as f:
            f.write(f"(no pgharbor report: {why})\n")
        return
    from .parse import quote_value
    admin = f"host={t.sock} port={t.port} dbname=pgharbor user={quote_value(h.bench_user)}"
    say(f"pgharbor report --admin \"{admin}\" > {path}")
    for extra, out in (([], path), (["--json"], f"{h.out}/overhead.json")):
        p = subprocess.run([t.binary, "report", "--admin", admin, *extra], cwd=h.tmp, env=t.env(),
                           capture_output=True, text=True)
        if p.returncode == 0:
            with open(out, "w") as f:
                f.write(p.stdout)
            continue
        warn(f"pgharbor report{' --json' if extra else ''} failed: {p.stderr.strip()}")
        if not extra:
            with open(path, "w") as f:
                f.write(f"(pgharbor report failed: {p.stderr.strip()})\n")
        break


def summary(h, raw, idle_csv):
    """summary.md's text."""
    lines = [f"## pgharbor vs PgBouncer vs PostgreSQL — {h.stamp}", ""]
    lines += target_lines(h) + server_lines(h) + method_lines(h) + [""]
    idle = load_rows(idle_csv) if os.path.exists(idle_csv) else None
    lines.append(summary_text(load_rows(raw), idle))
    lines += [f"- CRASH: {c}" for c in h.crashes]
    lines += log_lines(h)
    overhead = f"{h.out}/overhead.txt"
    if os.path.getsize(overhead):
        with open(overhead) as f:
            text = f.read()
        lines += ["", "### pgharbor's SHOW OVERHEAD at the end of the run (`pgharbor report`; whole run, warm-up "
                  "and readiness checks included)", "", "```", text.rstrip("\n"), "```"]
    return "\n".join(lines) + "\n"


def plots(h):
    """SVGs from the plot inputs, when gnuplot is there and wanted."""
    d = f"{h.out}/plots"
    if not h.s.plot:
        say(f"plots skipped (gnuplot missing or --no-plot); inputs in {d}/")
        return
    err = f"{d}/gnuplot.err"
    for gp in sorted(glob.glob(f"{d}/*.gp")):
        with open(err, "a") as e:
            if subprocess.run(["gnuplot", os.path.basename(gp)], cwd=d, stderr=e).returncode != 0:
                warn(f"gnuplot failed on {gp} (see {err})")
    if os.path.exists(err) and not os.path.getsize(err):
        os.remove(err)
    say("plots: " + " ".join(os.path.relpath(p, h.out) for p in sorted(glob.glob(f"{d}/*.svg"))))


def write_outputs(h, raw, idle_csv):
    """summary.md (also on stdout), results.json, medians.csv, the plots."""
    text = summary(h, raw, idle_csv)
    with open(f"{h.out}/summary.md", "w") as f:
        f.write(text)
    print(text, end="", flush=True)
    try:
        export(raw, h.out, idle_csv)
    except (OSError, ValueError, KeyError) as e:
        warn(f"export failed: {e}")
    plots(h)
    say(f"raw data: {raw}; summary: {h.out}/summary.md; JSON: {h.out}/results.json; overhead: "
        f"{h.out}/overhead.txt" + (f"; idle clients: {idle_csv}" if os.path.exists(idle_csv) else ""))
