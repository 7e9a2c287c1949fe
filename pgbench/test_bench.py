"""Unit tests for the harness (pgbench/harbor_bench, bench.py, idle.py, pgbench/run's options):
python3 -m unittest pgbench/test_bench.py"""

import csv
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import idle  # noqa: E402
from test_harness import Order, Parsers, PeerCell, ProcFs, Schema  # noqa: E402,F401  (run with these tests)

FIELDS = ("round,workload,transport,target,command,started,load1_before,ncpu,other_cpus,flags,"
          "status,rc,tps,tx,failed_tx,latency_ms,conn_ms,wall_s,pooler_cpu_s,pooler_us_per_tx,"
          "pg_cpu_s,pgbench_cpu_s,cert,bytes,mb_per_s,pooler_s_per_gb,pool_mode").split(",")


def run(rnd, w, t, g, tps=None, mbps=None, status="ok", cpu=None, flags="", lat=None, mode=None):
    r = {k: "" for k in FIELDS}
    r.update(round=str(rnd), workload=w, transport=t, target=g, command=f"cmd {w}",
             started="2026-01-01T00:00:00+00:00", load1_before="0.5", ncpu="2", other_cpus="0.01",
             flags=flags, status=status, rc="0", tx="100", failed_tx="0", wall_s="2.0",
             pool_mode=(mode if mode is not None else "session" if g in bench.MODE_TARGETS else ""))
    if lat is not None:
        r["latency_ms"] = str(lat)
    if tps is not None:
        r["tps"] = str(tps)
    if mbps is not None:
        r["mb_per_s"] = str(mbps)
    if cpu is not None:
        r["pooler_s_per_gb" if w in bench.BULK else "pooler_us_per_tx"] = str(cpu)
    return r


def sample():
    rows = []
    for rnd, k in ((1, 1.0), (2, 1.1), (3, 0.9)):
        rows += [run(rnd, "connect", "unix", "direct", 200 * k),
                 run(rnd, "connect", "unix", "pgharbor", 2000 * k, cpu=70),
                 run(rnd, "connect", "unix", "pgbouncer", 1000 * k, cpu=100),
                 run(rnd, "connect", "tcp", "direct", 100 * k),
                 run(rnd, "connect", "tcp", "pgharbor", 1000 * k, cpu=80),
                 run(rnd, "connect", "tcp-tls-ecdsa", "direct", 50 * k),
                 run(rnd, "connect", "tcp-tls-ecdsa", "pgharbor", 250 * k, cpu=400),
                 run(rnd, "bulk", "unix", "direct", mbps=300 * k),
                 run(rnd, "bulk", "unix", "pgharbor", mbps=270 * k, cpu=1.5)]
    rows.append(run(3, "connect", "tcp", "pgbouncer", 999, status="pgbench rc=2: boom"))
    return rows


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


class Arithmetic(unittest.TestCase):
    def test_median(self):
        self.assertEqual(bench.median([3, 1, 2]), 2)
        self.assertEqual(bench.median([4, 1, 2, 3]), 2.5)
        self.assertEqual(bench.median([None, 5, None]), 5)
        self.assertIsNone(bench.median([]))
        self.assertIsNone(bench.median([None]))

    def test_spread(self):
        self.assertAlmostEqual(bench.spread([90, 100, 110]), 20.0)
        self.assertIsNone(bench.spread([100]))

    def test_num_and_formats(self):
        self.assertEqual(bench.num("1.5"), 1.5)
        self.assertIsNone(bench.num(""))
        self.assertEqual(bench.fmt_tps(12345.6), "12 346")
        self.assertEqual(bench.fmt_tps(12.34), "12.3")
        self.assertEqual(bench.fmt_tps(None), "–")
        self.assertEqual(bench.fmt_ratio(3, 2), "1.50x")
        self.assertEqual(bench.fmt_ratio(3, 0), "–")
        self.assertEqual(bench.fmt_ratio(None, 2), "–")
        self.assertIsNone(bench.ratio(1, 0))

    def test_value_and_unit(self):
        self.assertEqual(bench.value(run(1, "bulk", "unix", "direct", tps=5, mbps=250)), 250)
        self.assertEqual(bench.value(run(1, "bulkselect", "unix", "direct", tps=5, mbps=90)), 90)
        self.assertEqual(bench.value(run(1, "tpcb", "unix", "direct", tps=5)), 5)
        self.assertEqual(bench.unit("bulkselect"), "MB/s")
        self.assertEqual(bench.unit("establish"), "tps")

    def test_ordered(self):
        self.assertEqual(bench.ordered(["tcp", "zz", "unix", "tcp"], bench.TRANSPORTS), ["unix", "tcp", "zz"])

    def test_paired_ratios(self):
        rows = sample()
        p = bench.paired_ratios(rows, "connect", ("unix", "pgharbor"), ("unix", "direct"))
        self.assertEqual(len(p), 3)
        for x in p:
            self.assertAlmostEqual(x, 10.0)
        # a failed run has no pair
        self.assertEqual(bench.paired_ratios(rows, "connect", ("tcp", "pgbouncer"), ("tcp", "direct")), [])
        # sorted
        rows2 = [run(1, "connect", "unix", "a", 2), run(1, "connect", "unix", "b", 1),
                 run(2, "connect", "unix", "a", 1), run(2, "connect", "unix", "b", 1)]
        self.assertEqual(bench.paired_ratios(rows2, "connect", ("unix", "a"), ("unix", "b")), [1.0, 2.0])

    def test_scram_secret_shape(self):
        s = bench.scram_secret("pw", 16)
        self.assertTrue(s.startswith("SCRAM-SHA-256$16:"))
        self.assertEqual(s.count("$"), 2)


class Writers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.raw = os.path.join(self.dir.name, "raw.csv")
        write_csv(sample(), self.raw)
        self.rows = bench.load_rows(self.raw)

    def tearDown(self):
        self.dir.cleanup()

    def test_cell_medians(self):
        cells = {(c["workload"], c["transport"], c["target"]): c for c in bench.cell_medians(self.rows)}
        c = cells[("connect", "unix", "pgharbor")]
        self.assertAlmostEqual(c["median"], 2000)
        self.assertEqual((c["runs"], c["ok_runs"], c["unit"]), (3, 3, "tps"))
        self.assertEqual(c["pooler_cpu"], 70)
        b = cells[("bulk", "unix", "pgharbor")]
        self.assertAlmostEqual(b["median"], 270)
        self.assertEqual((b["unit"], b["pooler_cpu_unit"]), ("MB/s", "s/GB"))
        f = cells[("connect", "tcp", "pgbouncer")]
        self.assertEqual((f["runs"], f["ok_runs"]), (1, 0))
        self.assertIsNone(f["median"])

    def test_ratios(self):
        rs = bench.ratios(self.rows)
        by = {(r["kind"], r["workload"], r["numerator"]["transport"]): r for r in rs}
        r = by[("pgharbor/direct", "connect", "unix")]
        self.assertAlmostEqual(r["ratio_of_medians"], 10.0)
        self.assertAlmostEqual(r["paired_median"], 10.0)
        self.assertEqual(r["pairs"], 3)
        self.assertAlmostEqual(by[("pgharbor/pgbouncer", "connect", "unix")]["ratio_of_medians"], 2.0)
        self.assertAlmostEqual(by[("pgharbor/direct", "bulk", "unix")]["ratio_of_medians"], 0.9)
        tls = by[("tls/plain", "connect", "tcp-tls-ecdsa")]
        self.assertEqual(tls["denominator"], {"transport": "tcp", "target": tls["numerator"]["target"]})
        self.assertAlmostEqual(by[("tls/plain", "connect", "tcp-tls-ecdsa")]["ratio_of_medians"],
                               0.5 if tls["numerator"]["target"] == "direct" else 0.25)
        # the failed PgBouncer TCP cell gives no number
        self.assertIsNone(by[("pgharbor/pgbouncer", "connect", "tcp")]["ratio_of_medians"])

    def test_export(self):
        bench.export(self.raw, self.dir.name)
        with open(os.path.join(self.dir.name, "results.json")) as f:
            d = json.load(f)
        self.assertEqual(len(d["runs"]), len(self.rows))
        self.assertEqual(d["runs"][0]["round"], 1)
        self.assertIsInstance(d["runs"][0]["tps"], float)
        self.assertIsNone(d["runs"][0]["mb_per_s"])
        self.assertTrue(d["medians"] and d["ratios"])
        with open(os.path.join(self.dir.name, "medians.csv"), newline="") as f:
            med = list(csv.DictReader(f))
        self.assertEqual(len(med), len(d["medians"]))
        self.assertEqual(med[0]["workload"], "connect")
        with open(os.path.join(self.dir.name, "plots", "connect.dat")) as f:
            dat = f.read().splitlines()
        self.assertTrue(dat[0].startswith("transport "))
        self.assertEqual(len(dat), 1 + 3)  # unix, tcp, tcp-tls-ecdsa
        self.assertIn("-", dat[2].split())  # PgBouncer's failed TCP cell
        self.assertTrue(os.path.exists(os.path.join(self.dir.name, "plots", "bulk.gp")))

    def test_summarize_table(self):
        buf = io.StringIO()
        with redirect_stdout(buf):
            bench.summarize(self.raw)
        out = buf.getvalue()
        self.assertIn("| target | Unix socket | TCP plain | TCP + TLS (ECDSA P-256) |", out)
        self.assertIn("| pgharbor / PostgreSQL | 10.00x | 10.00x | 5.00x |", out)
        self.assertIn("| pgharbor / PgBouncer | 2.00x | – |", out)
        self.assertIn("NOT OK: round 3 connect/tcp/pgbouncer", out)
        self.assertIn("### Issue 6's targets", out)
        self.assertIn("bulk, Unix socket: pgharbor / PostgreSQL = 0.90x", out)

    def test_main_usage(self):
        with redirect_stdout(io.StringIO()):
            sys_stderr, sys.stderr = sys.stderr, io.StringIO()
            try:
                self.assertEqual(bench.main(["nonsense"]), 2)
            finally:
                sys.stderr = sys_stderr


def txpool_sample():
    """Issue 4's cells: pgharbor and PgBouncer in transaction mode, 2 rounds."""
    rows = []
    for rnd, k in ((1, 1.0), (2, 1.1)):
        for w in ("persistent64", "tpcb64"):
            for t in ("unix", "tcp"):
                rows += [run(rnd, w, t, "direct", 50000 * k, lat=1.2),
                         run(rnd, w, t, "pgharbor", 42000 * k, cpu=9.0, lat=1.5, mode="transaction"),
                         run(rnd, w, t, "pgbouncer", 33000 * k, cpu=10.5, lat=1.9, mode="transaction")]
    return rows


IDLE_FIELDS = ["target", "transport", "pool_mode", "clients", "connected", "failed",
               "rss_before_kib", "rss_after_kib", "kib_per_client", "seconds", "error"]


def idle_rows():
    def row(g, t, before, after, connected=10000, error=""):
        return {"target": g, "transport": t, "pool_mode": "transaction", "clients": "10000",
                "connected": str(connected), "failed": str(10000 - connected),
                "rss_before_kib": str(before), "rss_after_kib": str(after),
                "kib_per_client": f"{(after - before) / connected:.2f}", "seconds": "3.0", "error": error}
    return [row("pgharbor", "tcp", 20000, 40000), row("pgharbor", "tcp-tls", 20000, 200000),
            row("pgbouncer", "tcp", 10000, 23000), row("pgbouncer", "tcp-tls", 10000, 180000, 9990, "OSError: x")]


class Labels(unittest.TestCase):
    def test_persistent_workloads(self):
        self.assertEqual(bench.persistent_clients("persistent"), ("persistent", 16))
        self.assertEqual(bench.persistent_clients("tpcb64"), ("tpcb", 64))
        self.assertIsNone(bench.persistent_clients("tpcb064"))
        self.assertIsNone(bench.persistent_clients("connect8"))
        self.assertEqual(bench.workload_title("tpcb64"), "TPC-B-like, 64 clients")
        self.assertEqual(bench.workload_title("persistent"), "Persistent select-only, 16 clients")
        self.assertEqual(bench.workload_title("odd"), "odd")
        self.assertEqual(bench.workload_short("persistent64"), "select-only -c 64")
        self.assertEqual(bench.workload_order(["bulk", "tpcb64", "persistent64", "tpcb", "persistent8",
                                               "connect", "zzz"]),
                         ["connect", "persistent8", "persistent64", "tpcb", "tpcb64", "bulk", "zzz"])

    def test_target_labels_and_subject(self):
        rows = [run(1, "connect", "unix", "pgharbor", 1, mode="transaction"),
                run(1, "connect", "unix", "pgbouncer", 1, mode="transaction"),
                run(1, "connect", "unix", "direct", 1), run(1, "connect", "unix", "pooler", 1)]
        labels = bench.target_labels(rows)
        self.assertEqual(labels["pgharbor"], "pgharbor transaction")
        self.assertEqual(labels["pgbouncer"], "PgBouncer transaction")
        self.assertEqual(labels["direct"], "PostgreSQL direct")
        self.assertEqual(labels["pooler"], "pooler under test (--pooler)")
        # raw.csv from before the pool_mode column: session
        old = [{k: v for k, v in r.items() if k != "pool_mode"} for r in rows]
        self.assertEqual(bench.target_labels(old)["pgharbor"], "pgharbor session")
        self.assertEqual(bench.subject(["direct", "pgharbor", "pooler"]), "pgharbor")
        self.assertEqual(bench.subject(["direct", "pooler"]), "pooler")
        self.assertIsNone(bench.subject(["direct"]))


class Conninfo(unittest.TestCase):
    def test_key_value(self):
        self.assertEqual(bench.parse_conninfo("host=/tmp port = 5433  dbname='my db' user=u password=p\\ q"),
                         {"host": "/tmp", "port": "5433", "dbname": "my db", "user": "u", "password": "p q"})
        self.assertEqual(bench.parse_conninfo("application_name='it\\'s'"), {"application_name": "it's"})
        for bad in ("host", "host=/tmp dbname='x", "host=a,b"):
            with self.assertRaises(ValueError, msg=bad):
                bench.parse_conninfo(bad)

    def test_uri(self):
        self.assertEqual(bench.parse_conninfo("postgresql://us%40er:pw@[::1]:5433/db?sslmode=require&connect_timeout=5"),
                         {"user": "us@er", "password": "pw", "host": "::1", "port": "5433", "dbname": "db",
                          "sslmode": "require", "connect_timeout": "5"})
        self.assertEqual(bench.parse_conninfo("postgres://%2Fvar%2Frun%2Fpostgresql/app"),
                         {"host": "/var/run/postgresql", "dbname": "app"})
        self.assertEqual(bench.parse_conninfo("postgresql://"), {})

    def test_split(self):
        e = bench.split_conninfo("host=/s port=5 user=u dbname='d b' password=x sslmode=verify-full "
                                 "hostaddr=1.2.3.4 connect_timeout=5 application_name='a b'")
        self.assertEqual((e.host, e.port, e.user, e.dbname, e.password, e.rest),
                         ("/s", "5", "u", "d b", "x", "connect_timeout=5 application_name='a b'"))
        self.assertEqual(bench.quote_value("a'b\\"), "'a\\'b\\\\'")
        self.assertEqual(bench.quote_value(""), "''")
        self.assertEqual(bench.split_conninfo("").host, "")
        with self.assertRaises(ValueError):
            bench.split_conninfo("port")


class TransactionPooling(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.raw = os.path.join(self.dir.name, "raw.csv")
        self.idle = os.path.join(self.dir.name, "idle.csv")
        write_csv(txpool_sample(), self.raw)
        with open(self.idle, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=IDLE_FIELDS)
            w.writeheader()
            w.writerows(idle_rows())

    def tearDown(self):
        self.dir.cleanup()

    def summary(self, idle=True):
        buf = io.StringIO()
        with redirect_stdout(buf):
            bench.summarize(self.raw, self.idle if idle else None)
        return buf.getvalue()

    def test_glance_table(self):
        out = self.summary()
        self.assertIn("| workload | transport | PostgreSQL direct | pgharbor transaction | PgBouncer transaction "
                      "| pgharbor / PgBouncer tps | pgharbor / PgBouncer CPU per tx |", out)
        self.assertIn("| select-only -c 64 | Unix socket | 52 500 tps, 1.20 ms | 44 100 tps, 1.50 ms, 9.0 µs "
                      "| 34 650 tps, 1.90 ms, 10.5 µs | 1.27x | 0.86x |", out)
        self.assertIn("### TPC-B-like, 64 clients (`cmd tpcb64`)", out)

    def test_issue4_checks(self):
        out = self.summary()
        self.assertIn("### Issue 4's targets", out)
        self.assertIn("- TPC-B-like -c 64, TCP plain: pgharbor / PgBouncer tps = 1.27x; ≥ 1.2x: **MET**; "
                      "CPU per transaction 9.0 vs 10.5 µs, no more than PgBouncer's: **MET**", out)
        # session mode: no issue 4 verdicts
        rows = [dict(r, pool_mode="session") if r["pool_mode"] else r for r in txpool_sample()]
        write_csv(rows, self.raw)
        self.assertNotIn("Issue 4's targets", self.summary())

    def test_failed_pgharbor(self):
        rows = [r for r in txpool_sample() if r["target"] != "pgharbor"]
        rows += [run(1, w, t, "pgharbor", status="not run: pgharbor check refused", mode="transaction")
                 for w in ("persistent64", "tpcb64") for t in ("unix", "tcp")]
        for r in rows[-4:]:
            r["load1_before"] = ""
            r["tx"] = r["failed_tx"] = r["wall_s"] = ""
        write_csv(rows, self.raw)
        out = self.summary(idle=False)
        self.assertIn("| pgharbor transaction | – [1 failed] | – [1 failed] |", out)
        self.assertIn("- not measured: no pgharbor run succeeded (first: not run: pgharbor check refused)", out)
        self.assertIn("| select-only -c 64 | Unix socket | 52 500 tps, 1.20 ms | failed |", out)

    def test_idle_table(self):
        out = self.summary()
        self.assertIn("### Memory per idle client: VmRSS growth / clients logged in, KiB (10000 idle clients", out)
        self.assertIn("| pgharbor transaction | 2.00 | 18.00 | TCP plain 10000/10000; TCP + TLS 10000/10000 |", out)
        self.assertIn("| pgharbor / PgBouncer | 1.54x | 1.06x | |", out)
        self.assertIn("- Issue 4: memory per idle client within 2x PgBouncer's, TCP plain: 2.00 vs 1.30 KiB: **MET**", out)
        self.assertIn("PgBouncer transaction, TCP + TLS: 10 of 10000 logins failed, first: OSError: x", out)

    def test_export_with_idle(self):
        bench.export(self.raw, self.dir.name, self.idle)
        with open(os.path.join(self.dir.name, "results.json")) as f:
            d = json.load(f)
        self.assertEqual(len(d["idle"]), 4)
        self.assertEqual(d["idle"][0]["connected"], 10000)
        self.assertEqual(d["idle"][0]["kib_per_client"], 2.0)
        self.assertIsNone(d["idle"][0]["error"])
        self.assertEqual(d["runs"][1]["pool_mode"], "transaction")
        # without an idle file: no "idle" key
        bench.export(self.raw, self.dir.name, os.path.join(self.dir.name, "missing.csv"))
        with open(os.path.join(self.dir.name, "results.json")) as f:
            self.assertNotIn("idle", json.load(f))


def baseline_sample():
    """--baseline-bin: pgharbor and pgharbor-base (the older build) in the same cells, 3 rounds.
    pgharbor does 1.05x the base's tps with 0.9x its CPU per tx; bulk 0.95x the MB/s at 1.25x
    the CPU per GB; PgBouncer in the connect cells."""
    rows = []
    for rnd, k in ((1, 1.0), (2, 1.1), (3, 0.9)):
        for t in ("unix", "tcp"):
            rows += [run(rnd, "persistent", t, "direct", 30000 * k, lat=0.5),
                     run(rnd, "persistent", t, "pgharbor", 21000 * k, cpu=9.0, lat=0.7),
                     run(rnd, "persistent", t, "pgharbor-base", 20000 * k, cpu=10.0, lat=0.8),
                     run(rnd, "persistent", t, "pgbouncer", 15000 * k, cpu=12.0, lat=1.0)]
        rows += [run(rnd, "bulk", "unix", "pgharbor", mbps=190 * k, cpu=2.5),
                 run(rnd, "bulk", "unix", "pgharbor-base", mbps=200 * k, cpu=2.0)]
    # round 2 of the base's TCP cell is 10% faster than its pgharbor run: paired ratios differ
    for r in rows:
        if (r["round"], r["workload"], r["transport"], r["target"]) == ("2", "persistent", "tcp", "pgharbor-base"):
            r["tps"] = str(21000 * 1.1 * 1.1)
    return rows


class Baseline(unittest.TestCase):
    """pgharbor / pgharbor-base (--baseline-bin): two builds of pgharbor in the same run."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.raw = os.path.join(self.dir.name, "raw.csv")
        write_csv(baseline_sample(), self.raw)
        self.rows = bench.load_rows(self.raw)

    def tearDown(self):
        self.dir.cleanup()

    def summary(self):
        buf = io.StringIO()
        with redirect_stdout(buf):
            bench.summarize(self.raw)
        return buf.getvalue()

    def test_ratios(self):
        by = {(r["kind"], r["workload"], r["numerator"]["transport"]): r for r in bench.ratios(self.rows)}
        r = by[("pgharbor/pgharbor-base", "persistent", "unix")]
        self.assertEqual((r["metric"], r["unit"]), ("throughput", "tps"))
        self.assertEqual(r["denominator"], {"transport": "unix", "target": "pgharbor-base"})
        self.assertAlmostEqual(r["ratio_of_medians"], 1.05)
        self.assertAlmostEqual(r["paired_median"], 1.05)
        self.assertEqual(r["pairs"], 3)
        c = by[("pgharbor/pgharbor-base cpu", "persistent", "unix")]
        self.assertEqual((c["metric"], c["unit"]), ("pooler_cpu", "µs/tx"))
        self.assertAlmostEqual(c["ratio_of_medians"], 0.9)
        self.assertAlmostEqual(c["paired_median"], 0.9)
        # bulk: MB/s and CPU per GB
        b = by[("pgharbor/pgharbor-base", "bulk", "unix")]
        self.assertEqual(b["unit"], "MB/s")
        self.assertAlmostEqual(b["ratio_of_medians"], 0.95)
        bc = by[("pgharbor/pgharbor-base cpu", "bulk", "unix")]
        self.assertEqual(bc["unit"], "s/GB")
        self.assertAlmostEqual(bc["ratio_of_medians"], 1.25)
        # paired per round vs ratio of medians: round 2's base run was 1.21x faster
        tcp = by[("pgharbor/pgharbor-base", "persistent", "tcp")]
        self.assertAlmostEqual(tcp["paired_min"], 21000 * 1.1 / (21000 * 1.21))
        self.assertAlmostEqual(tcp["paired_median"], 1.05)
        self.assertAlmostEqual(tcp["ratio_of_medians"], 21000 / 20000)
        # the base is a pooler in --pool-mode, not a subject of the other ratios
        self.assertNotIn(("pgharbor-base/direct", "persistent", "unix"), by)
        self.assertIn(("pgharbor/pgbouncer", "persistent", "unix"), by)

    def test_paired_cpu_field(self):
        p = bench.paired_ratios(self.rows, "bulk", ("unix", "pgharbor"), ("unix", "pgharbor-base"),
                                "pooler_s_per_gb")
        self.assertEqual(len(p), 3)
        for x in p:
            self.assertAlmostEqual(x, 1.25)

    def test_no_baseline_no_cpu_ratios(self):
        kinds = {r["kind"] for r in bench.ratios(bench.load_rows(self._write(sample())))}
        self.assertFalse(any("pgharbor-base" in k for k in kinds))
        self.assertFalse(any(k.endswith(" cpu") for k in kinds))

    def _write(self, rows):
        path = os.path.join(self.dir.name, "other.csv")
        write_csv(rows, path)
        return path

    def test_labels_and_order(self):
        labels = bench.target_labels(self.rows)
        self.assertEqual(labels["pgharbor-base"], "pgharbor-base session")
        self.assertEqual(bench.ordered(["pgbouncer", "pgharbor-base", "direct", "pgharbor"], bench.TARGETS),
                         ["direct", "pgharbor", "pgharbor-base", "pgbouncer"])

    def test_medians_csv(self):
        bench.export(self.raw, self.dir.name)
        with open(os.path.join(self.dir.name, "medians.csv"), newline="") as f:
            med = {(r["workload"], r["transport"], r["target"]): r for r in csv.DictReader(f)}
        h = med[("persistent", "unix", "pgharbor")]
        self.assertAlmostEqual(float(h["vs_base"]), 1.05)
        self.assertAlmostEqual(float(h["cpu_vs_base"]), 0.9)
        self.assertEqual(med[("persistent", "unix", "pgharbor-base")]["vs_base"], "")
        self.assertEqual(med[("persistent", "unix", "pgbouncer")]["cpu_vs_base"], "")
        self.assertAlmostEqual(float(med[("bulk", "unix", "pgharbor")]["cpu_vs_base"]), 1.25)
        with open(os.path.join(self.dir.name, "results.json")) as f:
            d = json.load(f)
        self.assertTrue(any(r["kind"] == "pgharbor/pgharbor-base cpu" for r in d["ratios"]))
        self.assertTrue(any(c["target"] == "pgharbor-base" for c in d["medians"]))
        # without a baseline medians.csv keeps its columns
        other = self._write(sample())
        bench.medians_csv(bench.load_rows(other), os.path.join(self.dir.name, "m2.csv"))
        with open(os.path.join(self.dir.name, "m2.csv"), newline="") as f:
            self.assertNotIn("vs_base", next(csv.reader(f)))

    def test_summary(self):
        out = self.summary()
        # the throughput table: a row for the base, its ratio and the paired one
        self.assertIn("| pgharbor-base session | 20 000 (±10%) |", out)
        self.assertIn("| pgharbor / pgharbor-base | 1.05x | 1.05x |", out)
        self.assertIn("| pgharbor / pgharbor-base, paired per round | 1.05x (1.05–1.05) | 1.05x (0.91–1.05) |", out)
        self.assertIn("| pgharbor / pgharbor-base | 0.95x |", out)  # bulk MB/s
        # the CPU tables
        self.assertIn("| pgharbor-base session | 10.0 | 10.0 |", out)
        self.assertIn("| pgharbor / pgharbor-base | 0.90x | 0.90x |", out)
        self.assertIn("| pgharbor / pgharbor-base | 1.25x |", out)  # bulk s/GB
        # at a glance
        self.assertIn("| pgharbor / pgharbor-base tps | pgharbor / pgharbor-base CPU per tx |", out)
        self.assertIn("| 1.40x | 0.75x | 1.05x | 0.90x |", out)
        # the baseline section and its bar
        self.assertIn("### pgharbor / pgharbor-base: the build under test over the baseline build", out)
        self.assertIn("| persistent | Unix socket | 21 000 tps | 20 000 tps | 1.05x | 1.05x (1.05–1.05) "
                      "| 9.0 µs | 10.0 µs | 0.90x | 0.90x (0.90–0.90) | **MET** |", out)
        self.assertIn("| bulk | Unix socket | 190 MB/s | 200 MB/s | 0.95x | 0.95x (0.95–0.95) "
                      "| 2.50 s/GB | 2.00 s/GB | 1.25x | 1.25x (1.25–1.25) | **NOT MET** |", out)
        self.assertIn("- pgharbor at or above 0.98x pgharbor-base on throughput: 2 of 3 cells; "
                      "not: bulk/Unix socket 0.95x", out)

    def test_failed_baseline(self):
        rows = [r for r in baseline_sample() if r["target"] != "pgharbor-base"]
        for rnd in (1, 2, 3):
            for w, t in (("persistent", "unix"), ("persistent", "tcp"), ("bulk", "unix")):
                r = run(rnd, w, t, "pgharbor-base", status="not run: pgharbor-base check refused pgharbor's "
                        "configuration: unknown field `max_client_conn`")
                r["tx"] = r["failed_tx"] = r["wall_s"] = r["load1_before"] = ""
                rows.append(r)
        write_csv(rows, self.raw)
        out = self.summary()
        self.assertIn("| pgharbor-base session | – [3 failed] | – [3 failed] |", out)
        self.assertIn("| pgharbor / pgharbor-base | – | – |", out)
        self.assertIn("- not measured: no pgharbor-base run succeeded (first: not run: pgharbor-base check "
                      "refused pgharbor's configuration: unknown field `max_client_conn`)", out)
        self.assertIn("NOT OK: round 1 persistent/unix/pgharbor-base: not run:", out)
        by = {(r["kind"], r["workload"], r["numerator"]["transport"]): r for r in bench.ratios(bench.load_rows(self.raw))}
        self.assertIsNone(by[("pgharbor/pgharbor-base", "persistent", "unix")]["ratio_of_medians"])
        self.assertIsNone(by[("pgharbor/pgharbor-base cpu", "persistent", "unix")]["paired_median"])

    def test_idle_ratio(self):
        idle_path = os.path.join(self.dir.name, "idle.csv")
        rows = idle_rows()
        rows += [dict(r, target="pgharbor-base", rss_after_kib=str(int(r["rss_after_kib"]) // 2),
                      kib_per_client=f"{float(r['kib_per_client']) * 2:.2f}")
                 for r in rows if r["target"] == "pgharbor"]
        with open(idle_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=IDLE_FIELDS)
            w.writeheader()
            w.writerows(rows)
        buf = io.StringIO()
        with redirect_stdout(buf):
            bench.summarize(self.raw, idle_path)
        out = buf.getvalue()
        self.assertIn("| pgharbor-base transaction | 4.00 | 36.00 |", out)
        self.assertIn("| pgharbor / pgharbor-base | 0.50x | 0.50x | |", out)


class IdleClient(unittest.TestCase):
    def test_phase(self):
        self.assertEqual(idle.parse_phase("tcp=127.0.0.1:6432"), ("tcp", ("127.0.0.1", 6432)))
        self.assertEqual(idle.parse_phase("tls=[::1]:5"), ("tls", ("::1", 5)))
        self.assertEqual(idle.parse_phase("unix=/s/.s.PGSQL.5"), ("unix", "/s/.s.PGSQL.5"))
        import argparse
        for bad in ("udp=1:2", "tcp=host", "tcp=host:x", "unix="):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                idle.parse_phase(bad)

    def test_scram_rfc7677(self):
        # RFC 7677 section 3 (with the user name in client-first, as the RFC has it)
        s = idle.Scram("pencil")
        s.nonce = "rOprNGfwEbeRWgbNEkqO"
        s.first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
        final = s.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
        self.assertEqual(final, b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        with self.assertRaises(idle.LoginError):
            s.final(b"r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")

    def test_startup_and_errors(self):
        pkt = idle.startup("u", "d")
        self.assertEqual(int.from_bytes(pkt[:4], "big"), len(pkt))
        self.assertEqual(pkt[4:8], (196608).to_bytes(4, "big"))
        self.assertIn(b"user\0u\0database\0d\0", pkt)
        self.assertEqual(idle.error_text(b"SFATAL\0C28P01\0Mpassword authentication failed\0\0"),
                         "FATAL 28P01: password authentication failed")

    def test_args(self):
        a = idle.parse_args(["--pid", "1", "--clients", "5", "--user", "u", "--dbname", "d", "--csv", "x",
                             "--target", "pgharbor", "--phase", "tcp=127.0.0.1:1", "--phase", "tls=127.0.0.1:1"])
        self.assertEqual((a.clients, len(a.phase), a.concurrency), (5, 2, 64))
        with redirect_stdout(io.StringIO()):
            sys_stderr, sys.stderr = sys.stderr, io.StringIO()
            try:
                with self.assertRaises(SystemExit):
                    idle.parse_args(["--pid", "1", "--clients", "0", "--user", "u", "--dbname", "d",
                                     "--csv", "x", "--target", "t", "--phase", "tcp=a:1"])
            finally:
                sys.stderr = sys_stderr



class RunArguments(unittest.TestCase):
    """pgbench/run's argument parsing: errors come before anything is installed or started."""
    RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run")

    def run_script(self, *args):
        import subprocess
        return subprocess.run(["bash", self.RUN, *args], capture_output=True, text=True, timeout=30)

    def test_help(self):
        p = self.run_script("--help")
        self.assertEqual(p.returncode, 0)
        for w in ("connect8", "establish", "persistent64", "tpcb", "bulkselect", "--quick", "--pool-mode",
                  "--profile", "txpool", "--clients", "--skip", "--pg", "--pooler", "--idle-clients",
                  "--pgharbor-bin", "--no-install", "--print-config"):
            self.assertIn(w, p.stdout)

    def test_bad_arguments(self):
        for args, msg in ((["--bogus"], "unknown option"), (["--rounds", "0"], "not a positive integer"),
                          (["--workloads", "connect,nope"], "unknown value 'nope'"),
                          (["--transports", "udp"], "unknown value 'udp'"), (["--cert", "dsa"], "--cert"),
                          (["--time"], "needs a value")):
            p = self.run_script(*args)
            self.assertEqual(p.returncode, 1, args)
            self.assertIn(msg, p.stderr, args)


    def config(self, *args):
        p = self.run_script(*args, "--print-config")
        self.assertEqual(p.returncode, 0, (args, p.stderr))
        return dict(line.split("=", 1) for line in p.stdout.splitlines())

    def error(self, *args):
        p = self.run_script(*args, "--print-config")
        self.assertEqual(p.returncode, 1, (args, p.stdout))
        return p.stderr

    def test_default_profile(self):
        c = self.config()
        self.assertEqual((c["profile"], c["rounds"], c["time"], c["warmup"], c["scale"]),
                         ("default", "3", "4", "2", "10"))
        self.assertEqual(c["workloads"], "connect,connect8,establish,persistent,persistent64,tpcb,bulk,bulkselect")
        self.assertEqual(c["transports"], "unix,unix-peer,tcp,tcp-tls-ecdsa")
        self.assertEqual((c["pool_mode"], c["pool_size"], c["idle_clients"], c["skip"]), ("session", "70", "0", ""))
        self.assertEqual((c["pg"], c["pooler"], c["install"], c["plot"]), ("throwaway", "none", "1", "1"))

    def test_profiles(self):
        q = self.config("--quick")
        self.assertEqual((q["profile"], q["rounds"], q["time"], q["warmup"], q["skip"]), ("quick", "1", "2", "1", "notls"))
        self.assertEqual(self.config("--profile", "quick", "--rounds", "2")["rounds"], "2")
        t = self.config("--profile", "txpool")
        self.assertEqual((t["workloads"], t["transports"], t["pool_mode"], t["pool_size"], t["time"], t["rounds"]),
                         ("persistent64,tpcb64", "unix,tcp", "transaction", "20", "30", "3"))
        self.assertEqual((t["idle_clients"], t["max_client_conn"]), ("10000", "10200"))
        t2 = self.config("--profile", "txpool", "--pool-mode", "session", "--idle-clients", "0", "--time", "5")
        self.assertEqual((t2["pool_mode"], t2["pool_size"], t2["idle_clients"], t2["time"]), ("session", "70", "0", "5"))
        self.assertIn("--profile: default, quick or txpool", self.error("--profile", "fast"))

    def test_rounds_time_warmup_scale(self):
        c = self.config("--rounds", "5", "--time", "7", "--warmup", "0", "--scale", "3")
        self.assertEqual((c["rounds"], c["time"], c["warmup"], c["scale"]), ("5", "7", "0", "3"))
        self.assertIn("not a positive integer", self.error("--scale", "0"))
        self.assertIn("--warmup: not a number", self.error("--warmup", "x"))

    def test_workloads_and_clients(self):
        self.assertEqual(self.config("--clients", "16,64")["workloads"],
                         "connect,connect8,establish,persistent,persistent64,tpcb,tpcb64,bulk,bulkselect")
        self.assertEqual(self.config("--workloads", "tpcb,persistent", "--clients", "64,8")["workloads"],
                         "persistent8,persistent64,tpcb8,tpcb64")
        self.assertEqual(self.config("--workloads", "bulk,tpcb32,connect")["workloads"], "connect,tpcb32,bulk")
        c = self.config("--workloads", "persistent", "--clients", "100")
        self.assertEqual((c["workloads"], c["pool_size"]), ("persistent100", "106"))
        self.assertIn("no persistent workload", self.error("--workloads", "connect", "--clients", "8"))
        self.assertIn("not a positive integer: '0'", self.error("--clients", "0"))
        self.assertIn("not a positive integer: 'x'", self.error("--clients", "16,x"))
        self.assertIn("unknown value 'tpcb0'", self.error("--workloads", "tpcb0"))

    def test_transports_and_cert(self):
        c = self.config("--transports", "tcp-tls,unix", "--cert", "both")
        self.assertEqual((c["transports"], c["certs"]), ("unix,tcp-tls-ecdsa,tcp-tls-rsa", "ecdsa,rsa"))

    def test_pool_mode_and_size(self):
        self.assertEqual(self.config("--pool-mode", "transaction")["pool_size"], "20")
        self.assertEqual(self.config("--pool-mode", "statement")["pool_mode"], "statement")
        self.assertEqual(self.config("--pool-mode", "transaction", "--pool-size", "5")["pool_size"], "5")
        self.assertIn("--pool-mode: session, transaction or statement", self.error("--pool-mode", "txn"))
        self.assertIn("not a positive integer", self.error("--pool-size", "0"))

    def test_skip(self):
        self.assertEqual(self.config("--skip", "pgbouncer,direct")["skip"], "direct,pgbouncer")
        self.assertEqual(self.config("--skip-pgbouncer", "--skip-notls")["skip"], "pgbouncer,notls")
        self.assertEqual(self.config("--skip", "pgharbor")["skip"], "pgharbor,notls")
        self.assertIn("unknown target 'bouncer'", self.error("--skip", "bouncer"))
        self.assertIn("every target skipped", self.error("--skip", "direct,pgharbor,pgbouncer"))

    def test_idle_clients(self):
        c = self.config("--idle-clients", "500")
        self.assertEqual((c["idle_clients"], c["max_client_conn"], c["fd_limit"]), ("500", "2000", "4096"))
        c = self.config("--idle-clients", "5000", "--pool-mode", "transaction")
        self.assertEqual((c["max_client_conn"], c["fd_limit"]), ("5200", "5496"))
        self.assertIn("--idle-clients: not a number", self.error("--idle-clients", "-1"))

    def test_pg(self):
        c = self.config("--pg", "host=/tmp port=5433 user=u dbname=d password=hunter2")
        self.assertEqual((c["pg"], c["pg_init"]), ("existing host=/tmp port=5433 user=u dbname=d", "0"))
        self.assertEqual(c["transports"], "unix,tcp,tcp-tls-ecdsa")  # no unix-peer: not our pg_hba.conf
        self.assertIn("needs the throwaway PostgreSQL", self.error("--pg", "host=/tmp", "--transports", "unix-peer"))
        self.assertEqual(self.config("--pg", "postgresql://u:pw@db.example:6000/app", "--init")["pg"],
                         "existing host=db.example port=6000 user=u dbname=app")
        self.assertEqual(self.config("--pg", "postgresql://u@h/a", "--init")["pg_init"], "1")
        p = self.run_script("--pg", "password=hunter2 host=/x", "--print-config")
        self.assertNotIn("hunter2", p.stdout + p.stderr)
        self.assertIn("--pg: cannot parse", self.error("--pg", "host='/tmp"))
        self.assertIn("one certificate kind", self.error("--pg", "host=/tmp", "--cert", "both"))
        self.assertIn("--init goes with --pg", self.error("--init"))

    def test_pooler(self):
        c = self.config("--pg", "host=/tmp", "--pooler", "host=127.0.0.1 port=6432", "--pooler-pid", "42")
        self.assertEqual((c["pooler"], c["pooler_pid"]), ("existing host=127.0.0.1 port=6432 user= dbname=", "42"))
        self.assertEqual((c["skip"], c["pgharbor_bin"]), ("pgharbor,notls", "none (pgharbor not run)"))
        self.assertIn("--pooler needs --pg", self.error("--pooler", "host=/tmp"))
        self.assertIn("--pooler-pid goes with --pooler", self.error("--pooler-pid", "42"))
        self.assertIn("--pooler: cannot parse", self.error("--pg", "host=/tmp", "--pooler", "port"))

    def test_binaries_install_output(self):
        c = self.config("--pgharbor-bin", "/bin/sh", "--no-install", "--no-plot", "--out", "/tmp/x", "--keep",
                        "--pg-port", "1", "--pgharbor-port", "2", "--pgbouncer-port", "3")
        self.assertEqual((c["pgharbor_bin"], c["install"], c["plot"], c["out"], c["ports"]),
                         ("/bin/sh", "0", "0", "/tmp/x", "1,2,3"))
        self.assertEqual(c["keep"], "1")
        self.assertEqual(self.config("--no-build")["pgharbor_bin"], "target/release/pgharbor (--no-build)")
        self.assertIn("not an executable file", self.error("--pgharbor-bin", "/nonexistent/pgharbor"))

    def test_baseline_bin(self):
        c = self.config()
        self.assertEqual((c["baseline_bin"], c["ports"]), ("none", "auto,auto,auto"))
        c = self.config("--pgharbor-bin", "/bin/sh", "--baseline-bin", "/bin/true")
        self.assertEqual((c["pgharbor_bin"], c["baseline_bin"], c["ports"]), ("/bin/sh", "/bin/true", "auto,auto,auto,auto"))
        self.assertEqual(self.config("--baseline-bin", "/bin/true", "--baseline-port", "7")["ports"], "auto,auto,auto,7")
        self.assertIn("--baseline-bin: not an executable file", self.error("--baseline-bin", "/nonexistent/pgharbor"))
        self.assertIn("not with --skip pgharbor", self.error("--baseline-bin", "/bin/true", "--skip", "pgharbor"))
        self.assertIn("not with --pooler", self.error("--pg", "host=/tmp", "--pooler", "host=/tmp",
                                                      "--baseline-bin", "/bin/true"))
        self.assertIn("--baseline-port goes with --baseline-bin", self.error("--baseline-port", "7"))
        self.assertIn("--baseline-bin", self.run_script("--help").stdout)

    def test_limits_and_bulk(self):
        c = self.config("--bulk-copies", "2", "--bulk-selects", "1", "--load-limit", "2.5", "--other-limit", "0.5")
        self.assertEqual((c["bulk_copies"], c["bulk_selects"], c["load_limit"], c["other_limit"]),
                         ("2", "1", "2.5", "0.5"))
        self.assertIn("--load-limit: not a number", self.error("--load-limit", "high"))

if __name__ == "__main__":
    unittest.main()
